"""The ledger copy use case (`rules ledger copy`): sessions copied from one ledger to
another, SQLite or PostgreSQL, in either direction (``engine.ledger.copy`` does the rows)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.core.errors import LedgerError
from engine.ledger.connection import open_ledger
from engine.ledger.copy import Copied, copy_sessions
from engine.ledger.store import LEDGER_FILE
from engine.ledger.url import LedgerUrl, parse_url


@dataclass(frozen=True)
class CopyRequest:
    """Copy ``session`` (every session of ``source`` when None) from the ledger
    ``source`` to ``target``, as ``as_name`` when given; ``replace`` replaces a session
    already in ``target`` (else it is refused). A ledger is a file, a session folder (its
    ledger file), ``sqlite:///path`` or ``postgresql://...``."""

    source: str
    target: str
    session: str | None = None
    as_name: str | None = None
    replace: bool = False


@dataclass(frozen=True)
class CopyReport:
    """The ledgers as messages name them (passwords redacted) and what each copy wrote."""

    source: str
    target: str
    copied: list[Copied]


def copy_ledger(request: CopyRequest) -> CopyReport:
    """Copy what ``request`` asks for, in one transaction on the target (LedgerError when
    a ledger cannot be read or reached, or a session is refused)."""
    source = _location(request.source, must_exist=True)
    target = _location(request.target, must_exist=False)
    with open_ledger(source) as from_ledger, open_ledger(target) as to_ledger:
        done = copy_sessions(
            from_ledger, to_ledger, request.session, request.as_name, request.replace
        )
    return CopyReport(str(source), str(target), done)


def _location(text: str, must_exist: bool) -> LedgerUrl:
    """The ledger ``text`` names; a session folder means its ledger file. A SQLite source
    that does not exist is an error (opening it would create an empty ledger)."""
    url = parse_url(text)
    if url.path is None:
        return url
    path = url.path / LEDGER_FILE if url.path.is_dir() else url.path
    if must_exist and not path.is_file():
        raise LedgerError(
            f"{path}: no ledger there; give a ledger file, a session folder holding "
            f"{LEDGER_FILE}, sqlite:///path or postgresql://user@host:port/dbname"
        )
    return parse_url(path)
