"""Where a session's attempts are recorded: the one place that opens a session.

With ``--ledger URL`` every session is a session of that ledger (SQLite or PostgreSQL),
named by the path segment of ``/v1/sessions/{session}/outputs``; without it, sessions are
folders under ``--sessions-dir`` (one SQLite ledger each), named the same way. Writes to
one session are serialized within a worker process (the ledger orders the processes).
"""

from __future__ import annotations

import re
import tempfile
import threading
from pathlib import Path

from engine.core import deadline
from engine.ledger.connection import Ledger, open_ledger
from engine.ledger.errors import LedgerError
from engine.ledger.store import Place
from engine.ledger.url import LedgerUrl, parse_url
from engine.pack.compiled import Pack
from engine.server.settings import ServerSettings
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


_pools: dict[str, Ledger] = {}
_pools_guard = threading.Lock()


def _shared_ledger(location: str, url: LedgerUrl) -> Ledger | None:
    """A PostgreSQL ledger opened once per process (its connection pool serves every
    request and thread; connecting and checking the schema per request would cost more than
    the evaluation); None for SQLite, whose connection belongs to one thread."""
    if url.backend == "sqlite":
        return None
    with _pools_guard:
        if location not in _pools:  # keyed by the URL as given (str(url) is redacted)
            _pools[location] = open_ledger(url)
        return _pools[location]


def open_session(pack: Pack, settings: ServerSettings, name: str) -> Session:
    """The session ``name`` of ``pack``, created on first use (the name is checked by
    ``session_name_problem`` first)."""
    if settings.ledger is not None:
        url = parse_url(settings.ledger)
        place = Place(url, name, None)
        return Session(pack, place, opened_ledger=_shared_ledger(settings.ledger, url))
    return Session(pack, Path(settings.sessions_dir) / name)


READY_SECONDS = 5.0
"""The longest a readiness probe waits for the ledger (a connection of the pool, a query)."""


def ready_problem(settings: ServerSettings) -> str | None:
    """Why this worker cannot record sessions now, found with what it records them with: a
    PostgreSQL ledger through the worker's own pool (a probe that opened a pool of its own
    failed under load when the server's connections were all taken, and took two
    connections of the server per probe)."""
    if settings.ledger is None:
        return sessions_writable(settings.sessions_dir)
    try:
        url = parse_url(settings.ledger)
        shared = _shared_ledger(settings.ledger, url)
        if shared is None:  # SQLite: a connection belongs to one thread, opened per use
            return ledger_problem(settings)
        with deadline.within(READY_SECONDS):
            shared.read(lambda tx: tx.one("SELECT 1"))
    except LedgerError as exc:
        return str(exc)
    return None


def ledger_problem(settings: ServerSettings) -> str | None:
    """Why sessions cannot be recorded now (the ledger unreachable, the sessions folder not
    writable), or None when they can."""
    if settings.ledger is None:
        return sessions_writable(settings.sessions_dir)
    try:
        open_ledger(settings.ledger).close()
    except LedgerError as exc:
        return str(exc)
    return None


def sessions_writable(folder: str) -> str | None:
    """Why sessions cannot be recorded under ``folder``, or None when they can."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".ready-"):
            pass
    except OSError as exc:
        return f"{folder}: sessions cannot be recorded here: {exc.strerror or exc}"
    return None
