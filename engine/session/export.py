"""A session's rows read out: its kept outputs as `--jsonl` records (`rules export`,
backtests) and its attempts for a session's page (`rules report`)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger import kept
from engine.ledger.errors import LedgerError
from engine.ledger.store import LEDGER_FILE, Place, SessionLedger, locate
from engine.session.session_ref import SessionRef

BATCH = 1000


Session = str | Path | Place | SessionRef


def session_ledger(session: Session) -> SessionLedger:
    """The ledger of an existing session (a folder, a place a ledger URL gives, or a
    session a front door names), opened for reading; LedgerError when a folder has none."""
    if isinstance(session, SessionRef):
        session = session.place()
    place = session if isinstance(session, Place) else locate(session)
    if not place.exists():
        raise LedgerError(f"{place.label}: not a session folder (no {LEDGER_FILE})")
    return SessionLedger(place, read_only=True)


def export_records(
    session: Session,
    after: int = 0,
    until: int | None = None,
    max_text_bytes: int = MAX_OUTPUT_BYTES,
) -> Iterator[dict[str, Any]]:
    """The session's kept attempts as records (block, text, nonce, vars, context, attempt;
    the id is the attempt's id in the ledger), oldest first, ids in ``(after, until]``;
    read in batches, so memory stays constant. A damaged one is ``{"id", "damaged"}``
    (``engine.ledger.kept.records``)."""
    with session_ledger(session) as ledger:
        while True:
            batch = ledger.read(
                functools.partial(
                    kept.records,
                    session=ledger.session,
                    after=after,
                    limit=BATCH,
                    max_text_bytes=max_text_bytes,
                )
            )
            for record in batch:
                if until is not None and record["id"] > until:
                    return
                yield record
            if len(batch) < BATCH:
                return
            after = batch[-1]["id"]


def attempt_rows(session: Session) -> Iterator[dict[str, Any]]:
    """The session's attempts, oldest first, read row by row (for a session's page)."""
    with session_ledger(session) as ledger:
        yield from ledger.attempt_rows()


def kept_id_range(session: Session) -> tuple[int, int, int]:
    """(count, first id, last id) of the session's kept attempts."""
    with session_ledger(session) as ledger:
        return ledger.read(lambda tx: kept.id_range(tx, ledger.session))
