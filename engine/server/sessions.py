"""Where a session's attempts are recorded, as the server names them, and the lock that
orders one session's writes.

With ``--ledger URL`` every session is a session of that ledger (SQLite or PostgreSQL),
named by the path segment of ``/v1/sessions/{session}/outputs``; without it, sessions are
folders under ``--sessions-dir`` (one SQLite ledger each), named the same way
(``engine.session.recording.named_session``). Writes to one session are serialized within a
worker process (the ledger orders the processes).
"""

from __future__ import annotations

import threading

from engine.server.settings import ServerSettings
from engine.session.recording import ledger_problem as session_ledger_problem
from engine.session.recording import ready_problem as session_ready_problem
from engine.session.session_ref import SESSION_NAME, session_name_problem

__all__ = [
    "SESSION_NAME",
    "ledger_problem",
    "ready_problem",
    "session_lock",
    "session_name_problem",
]

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def session_lock(name: str) -> threading.Lock:
    """The lock that serializes writes to session ``name`` in this process."""
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def ledger_problem(settings: ServerSettings) -> str | None:
    """Why the server's sessions cannot be recorded now (the ledger unreachable, the
    sessions folder not writable), or None when they can."""
    return session_ledger_problem(settings.ledger, settings.sessions_dir)


def ready_problem(settings: ServerSettings) -> str | None:
    """Why this worker cannot record sessions now, asked through the worker's own pool."""
    return session_ready_problem(settings.ledger, settings.sessions_dir)
