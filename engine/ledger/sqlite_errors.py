"""What a SQLite error says about where a ledger lives, as a message naming the cause.

Most SQLite errors are not about the ledger file at all: a full disk, a disk that fails, a
lock another process holds, a file system mounted read-only. Those leave the ledger as it
is, and the message says what to do about the machine; only a file that is not a database
or is damaged is the ledger's own fault. The cause is read from SQLite's result code
(``sqlite_errorcode``, Python 3.11), else from its message.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from engine.ledger.lock import BUSY_TIMEOUT_MS

# SQLite's primary result codes (the low byte of an extended code)
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_NOMEM = 7
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14

LOW_SPACE_BYTES = 1024 * 1024
"""Free space under which a disk I/O error is said to be a full disk."""

_BY_TEXT = (
    ("database or disk is full", SQLITE_FULL),
    ("disk I/O error", SQLITE_IOERR),
    ("database is locked", SQLITE_BUSY),
    ("database table is locked", SQLITE_LOCKED),
    ("readonly database", SQLITE_READONLY),
    ("unable to open database", SQLITE_CANTOPEN),
    ("out of memory", SQLITE_NOMEM),
)


def primary_code(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code for ``exc``, or None when it cannot be told."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF
    text = str(exc)
    for words, found in _BY_TEXT:
        if words in text:
            return found
    return None


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on ``folder``'s file system."""
    try:
        stats = os.statvfs(folder)
    except (OSError, AttributeError):  # gone, or no statvfs (Windows)
        return None
    return stats.f_bavail * stats.f_frsize


def cause(exc: sqlite3.Error, path: Path) -> str | None:
    """The message of ``exc`` on the ledger at ``path`` when its cause lies outside the
    ledger (the disk, a lock, permissions, memory), else None (the file itself: damaged,
    not a database, changed by hand)."""
    code = primary_code(exc)
    if code in (SQLITE_BUSY, SQLITE_LOCKED):
        return locked(path, exc)
    if code in (SQLITE_FULL, SQLITE_IOERR):
        free = free_bytes(path.parent)
        if code == SQLITE_FULL or (free is not None and free < LOW_SPACE_BYTES):
            left = "" if free is None else f", {free} bytes free"
            return (
                f"{path}: the disk holding the ledger is full ({exc}{left}); nothing was "
                "written and the ledger was left as it is: free some space and try again"
            )
        return (
            f"{path}: the disk holding the ledger failed ({exc}); nothing was written and "
            "the ledger was left as it is: check the disk and its file system "
            "(read-only, removed, out of inodes), then try again"
        )
    if code == SQLITE_READONLY:
        return (
            f"{path}: the ledger cannot be written ({exc}): the file or its file system is "
            "read-only; recording needs write access to it and its folder (`rules log` "
            "only reads it)"
        )
    if code == SQLITE_CANTOPEN:
        return (
            f"{path}: the ledger cannot be opened ({exc}): check that its folder exists and "
            "this user may read and write it"
        )
    if code == SQLITE_NOMEM:
        return f"{path}: SQLite ran out of memory ({exc}); the ledger was left as it is"
    return None


def locked(path: Path, exc: object) -> str:
    """The message of a ledger another process held locked past the busy timeout."""
    return (
        f"{path}: another process has held the ledger locked for over "
        f"{BUSY_TIMEOUT_MS / 1000:g} s ({exc}); nothing was written: try again when it is "
        "done (a `sqlite3` shell or a backup holding a transaction open keeps it locked)"
    )
