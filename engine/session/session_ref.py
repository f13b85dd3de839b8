"""Which session a use case records in, named the way each front door names it: a session
folder (`--session DIR`, its own ledger), a session named in the ledger a URL gives
(`--ledger URL`), or a server's session by name (under its sessions folder, or in its
ledger). A use case opens it (``engine.session.recording.Session``), so front doors name
sessions and never open a ledger themselves. The names a caller may give a session or an
item are checked here, without importing the ledger.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.ledger.connection import Ledger
    from engine.ledger.store import Place

DEFAULT_SESSION = Path(".rules-session")
"""The session folder of `rules run`, `rules log` and ``engine.run`` by default."""

MAX_ITEM_CHARS = 1000
"""The longest item name a caller may give (`--item`, ``item=``)."""


def item_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an item, or None when it can."""
    if not name.strip():
        return "an item name must not be empty"
    if len(name) > MAX_ITEM_CHARS:
        return f"an item name has at most {MAX_ITEM_CHARS} characters, not {len(name)}"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "an item name must be text (it holds bytes that are not UTF-8)"
    return None


SESSION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A session name: a safe folder name (no separator, no leading dot, at most 128 chars)."""


@dataclass(frozen=True)
class SessionRef:
    """A session to record in: ``where`` is its folder (its ledger:
    ``where/ledger.sqlite3``), or with ``ledger`` (a path, ``sqlite:///path`` or
    ``postgresql://...``) its name in that ledger; ``opened``: that ledger already open and
    shared by the caller (a server's connection pool), left open when the session closes."""

    where: str | Path | Place
    ledger: str | Path | None = None
    opened: Ledger | None = None

    def place(self) -> Place:
        """Where the session lives: its ledger and its name or folder (LedgerError when
        its ledger is no ledger URL)."""
        # Deferred for start-up time: the ledger's modules cost `rules eval` 27 ms of
        # imports (-X importtime), and an evaluation without a session needs none.
        from engine.ledger.store import Place, locate

        where = self.where
        return where if isinstance(where, Place) else locate(where, self.ledger)

    def exists(self) -> bool:
        """Whether the session has a ledger yet (a folder's SQLite file; a server ledger
        always has one)."""
        return self.place().exists()


def session_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a server's session, or None when it can."""
    if SESSION_NAME.fullmatch(name) is None:
        return (
            "a session name is 1 to 128 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return None
