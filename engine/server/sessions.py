"""Where a session's attempts are recorded: the one place that opens a session.

Sessions are folders under ``--sessions-dir`` (one SQLite ledger each), named by the path
segment of ``/v1/sessions/{session}/outputs``. Writes to one session are serialized within
a worker process (the ledger's own lock orders the processes).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

from engine.pack.loaded import Pack
from engine.session.session import Session

SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A session name: a safe folder name (no separator, no leading dot, at most 128 chars)."""

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def session_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a session, or None when it can."""
    if SESSION_NAME.fullmatch(name) is None:
        return (
            "a session name is 1 to 128 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return None


def session_lock(name: str) -> threading.Lock:
    """The lock that serializes writes to session ``name`` in this process."""
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def open_session(pack: Pack, sessions_dir: str | Path, name: str) -> Session:
    """The session ``name`` of ``pack``, created on first use (the name is checked by
    ``session_name_problem`` first)."""
    return Session(pack, Path(sessions_dir) / name)
