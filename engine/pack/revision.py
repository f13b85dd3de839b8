"""A pack's revision: one hash of every file it is made of, so a decision names the policy
that made it (a decision log, a backtest of "the policy that was live").

The files are those under the folders of the pack's YAML files (the pack and every pack it
extends): the YAML, templates, contract texts, schemas, examples. The hash is of their
paths relative to their folder and of their bytes, in a fixed order, so it is the same in
every process and changes when any file is added, removed, renamed or edited. A symlink out
of a folder is hashed as where it points, never read through, and nothing is read past
``MAX_PACK_BYTES`` (``engine.format.packfolder``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from engine.format.packfolder import (
    MAX_PACK_BYTES,
    MAX_PACK_FILES,
    PackTooLarge,
    pack_folders,
    read_bounded,
    too_large,
    walk_pack_folder,
)

REVISION_CHARS = 16
"""Hex digits of SHA-256 a revision keeps: enough to tell revisions apart, short to read."""


def pack_revision(pack_files: Iterable[Path]) -> str:
    """The revision of the pack whose YAML files (its own first, then what it extends) are
    ``pack_files``: SHA-256 over every file of their folders, shortened. ``PackTooLarge``
    when the folders hold more than the bounds allow (`rules check` says so first)."""
    digest = hashlib.sha256()
    folders = pack_folders(pack_files)
    budget, count = MAX_PACK_BYTES, 0
    for index, folder in enumerate(folders):
        for found in walk_pack_folder(folder):
            count += 1
            if found.size > budget or count > MAX_PACK_FILES:
                raise PackTooLarge(too_large(folders[0]))
            content = read_bounded(found, budget)
            budget -= len(content)
            if budget < 0:  # the file grew since it was listed
                raise PackTooLarge(too_large(folders[0]))
            digest.update(f"{index}\0{found.relative}\0".encode())
            digest.update(content)
            digest.update(b"\0")
    return digest.hexdigest()[:REVISION_CHARS]
