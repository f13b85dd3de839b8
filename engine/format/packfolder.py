"""The files of a pack folder, as everything that hashes a pack walks them: never through
a symlink out of the folder, and bounded in bytes.

A pack's revision, its compiled-cache fingerprint and a git pack's locked content hash each
read every file of the pack's folder. A symlink there may point anywhere (``/dev/zero``, a
1.2 GB file, another user's secrets): it is never read through when it leaves the folder
(``PackFile.outside`` says where it points, and hashes take that text instead of the
bytes), and `rules check` reports it as ``path-escape``, as it reports a pack path that
resolves outside. A folder holding more than ``MAX_PACK_BYTES`` in its files, or more than
``MAX_PACK_FILES`` files, is ``pack-too-large``: a finding at `rules check`, and a
``PackTooLarge`` error from whatever would read it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import EngineError, Position
from engine.format.findings import Finding, FindingRule

MAX_PACK_BYTES = 64 * 1024 * 1024
"""The bytes the files of a pack (its folders, those it extends included) may hold."""

MAX_PACK_FILES = 10_000
"""The files a pack's folders may hold."""

PATH_ESCAPE = FindingRule(
    "path-escape",
    "A pack path resolves outside the pack (e.g. a symlink).",
    "Keep files inside the pack folder.",
)

PACK_TOO_LARGE = FindingRule(
    "pack-too-large",
    f"A pack's folders hold more than {MAX_PACK_BYTES // (1024 * 1024)} MiB or "
    f"{MAX_PACK_FILES:,} files.",
    "Keep only the pack's own files in its folder (data sets, builds and virtual "
    "environments elsewhere).",
)


class PackTooLarge(EngineError):
    """A pack's folders hold more than ``MAX_PACK_BYTES`` or ``MAX_PACK_FILES``."""


@dataclass(frozen=True)
class PackFile:
    """A file of a pack folder: its path relative to the folder (``/``-separated), the
    path to open, its size, and for a symlink that leaves the folder where it points
    (such a file is never opened)."""

    relative: str
    path: Path
    size: int
    outside: str | None = None


def hidden_or_cache(name: str) -> bool:
    """The folders a pack's revision leaves out: hidden ones and Python's caches."""
    return name.startswith(".") or name == "__pycache__"


def walk_pack_folder(
    folder: Path, skip_folder: Callable[[str], bool] = hidden_or_cache
) -> Iterator[PackFile]:
    """Every file under ``folder``, folder by folder in sorted order (the files of a
    folder, then its sub-folders), sub-folders ``skip_folder`` names left out. A symlink
    is followed only while it stays inside ``folder``; one to a folder is not walked (as
    ``os.walk`` does); one that leaves is yielded with ``outside`` set, file or folder.
    Anything but a regular file (a FIFO, a socket, a device) is left out."""
    root = os.path.realpath(folder)
    for directory, subdirs, names in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if not skip_folder(d))
        linked_folders = [d for d in subdirs if os.path.islink(os.path.join(directory, d))]
        for name in sorted(names) + linked_folders:
            path = Path(directory, name)
            relative = path.relative_to(folder).as_posix()
            try:
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    real = os.path.realpath(path)
                    if real != root and not real.startswith(root + os.sep):
                        yield PackFile(relative, path, 0, real)
                        continue
                    info = os.stat(path)
            except OSError:  # gone since listed, or a link to nothing
                continue
            if stat.S_ISREG(info.st_mode):
                yield PackFile(relative, path, info.st_size)


def bounded(files: Iterable[PackFile], where: Path) -> Iterator[PackFile]:
    """``files``, or ``PackTooLarge`` naming ``where`` once they hold more than
    ``MAX_PACK_BYTES`` or count more than ``MAX_PACK_FILES`` (by their sizes, before
    anything is read)."""
    total = 0
    for count, found in enumerate(files, 1):
        total += found.size
        if total > MAX_PACK_BYTES or count > MAX_PACK_FILES:
            raise PackTooLarge(too_large(where))
        yield found


def too_large(where: Path) -> str:
    return (
        f"{where}: the pack's folders hold more than {MAX_PACK_BYTES // (1024 * 1024)} MiB "
        f"or {MAX_PACK_FILES:,} files; keep only the pack's own files in its folder"
    )


_READ_CHUNK = 1 << 20


def read_bounded(found: PackFile, budget: int) -> bytes:
    """The bytes of ``found``, at most ``budget`` + 1 (the caller's bound tells a file
    that grew since it was listed); a link out of the folder is its target's path."""
    if found.outside is not None:
        return f"-> {found.outside}".encode()
    chunks: list[bytes] = []
    left = budget + 1
    with open(found.path, "rb") as handle:
        # in chunks: read(n) sets aside n bytes before it reads, and the budget is the whole
        # pack's (64 MiB), so each small file of a revision cost that much memory at once
        while left > 0 and (chunk := handle.read(min(left, _READ_CHUNK))):
            chunks.append(chunk)
            left -= len(chunk)
    return b"".join(chunks)


def pack_folders(pack_files: Iterable[Path]) -> list[Path]:
    """The folders of ``pack_files`` (a pack's YAML files), each once, in order."""
    folders: list[Path] = []
    for pack_file in pack_files:
        folder = Path(pack_file).resolve().parent
        if folder not in folders:
            folders.append(folder)
    return folders


def folder_findings(pack_files: Iterable[Path], show: Callable[[Path], str]) -> list[Finding]:
    """What `rules check` says of the folders of ``pack_files``: each symlink that leaves
    its folder (``path-escape``), and a size past the bounds (``pack-too-large``). Only
    names and sizes are read, never a file's bytes."""
    findings: list[Finding] = []
    total = count = 0
    folders = pack_folders(pack_files)
    for folder in folders:
        for found in walk_pack_folder(folder):
            total += found.size
            count += 1
            if found.outside is not None:
                findings.append(
                    PATH_ESCAPE.at(
                        f"the symlink {found.relative!r} points outside the pack "
                        f"({found.outside}); nothing is read through it",
                        Position(show(found.path)),
                        "copy the file into the pack instead of linking to it, or remove the link",
                    )
                )
            if count > MAX_PACK_FILES:
                break
    if total > MAX_PACK_BYTES or count > MAX_PACK_FILES:
        findings.append(PACK_TOO_LARGE.at(too_large(folders[0]), Position(show(folders[0]))))
    return findings
