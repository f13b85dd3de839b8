"""A pack's revision: one hash of every file it is made of, so a decision names the policy
that made it (a decision log, a backtest of "the policy that was live").

The files are those under the folders of the pack's YAML files (the pack and every pack it
extends): the YAML, templates, contract texts, schemas, examples. The hash is of their
paths relative to their folder and of their bytes, in a fixed order, so it is the same in
every process and changes when any file is added, removed, renamed or edited.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

REVISION_CHARS = 16
"""Hex digits of SHA-256 a revision keeps: enough to tell revisions apart, short to read."""

CHUNK = 1 << 16


def _files(folder: Path) -> Iterator[tuple[str, Path]]:
    """Every regular file under ``folder`` (hidden folders and caches left out), by its
    relative path in sorted order."""
    for directory, subdirs, names in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            path = Path(directory, name)
            if path.is_file():
                yield path.relative_to(folder).as_posix(), path


def pack_revision(pack_files: Iterable[Path]) -> str:
    """The revision of the pack whose YAML files (its own first, then what it extends) are
    ``pack_files``: SHA-256 over every file of their folders, shortened."""
    digest = hashlib.sha256()
    folders: list[Path] = []
    for pack_file in pack_files:
        folder = Path(pack_file).resolve().parent
        if folder not in folders:
            folders.append(folder)
    for index, folder in enumerate(folders):
        for relative, path in _files(folder):
            digest.update(f"{index}\0{relative}\0".encode())
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
            digest.update(b"\0")
    return digest.hexdigest()[:REVISION_CHARS]
