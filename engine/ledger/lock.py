"""The advisory lock that serialises opening a SQLite ledger (create, migrate) across
processes, on a ``ledger.lock`` file beside it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.core.deadline import remaining
from engine.ledger.errors import LedgerError

BUSY_TIMEOUT_MS = 8_000
"""How long a SQLite ledger waits for a lock another process holds before it says so.
A write holds the lock for milliseconds, so writers queue well within it; a lock held
longer is another program's (a `sqlite3` shell, a backup), and the command says whose
fault it is in under 10 s instead of waiting on in silence."""


@contextmanager
def opening_lock(
    lock_path: Path, advice: str = "writing a ledger needs write access to {folder}"
) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path``, waiting at most the busy timeout;
    ``advice`` ends the message when the lock file cannot be opened ({folder}: its folder)."""
    try:
        import fcntl  # POSIX only: deferred so that its absence (Windows) is handled here
    except ImportError:  # no advisory locks here (Windows): SQLite's own locking only
        yield
        return
    try:
        handle = open(lock_path, "a+b")  # noqa: SIM115 - closed in the finally below
    except OSError as exc:
        raise LedgerError(
            f"{lock_path}: cannot open the lock file: {exc.strerror or exc}; "
            + advice.format(folder=lock_path.parent)
        ) from None
    try:
        wait = BUSY_TIMEOUT_MS / 1000
        left = remaining()  # a caller's deadline (a server request's) may be sooner
        if left is not None:
            wait = max(0.0, min(wait, left))
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LedgerError(
                        f"{lock_path}: another process has held the ledger lock for "
                        f"{wait:g} s; try again when it is done"
                    ) from None
                time.sleep(0.005)
        yield
    finally:
        handle.close()  # closing releases the lock
