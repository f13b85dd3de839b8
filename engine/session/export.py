"""Kept outputs of a session as `--jsonl` records, for `rules export` and backtests."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger import kept
from engine.ledger.errors import LedgerError
from engine.ledger.store import LEDGER_FILE, Place, SessionLedger, locate

BATCH = 1000


def session_ledger(session: str | Path | Place) -> SessionLedger:
    """The ledger of an existing session (a folder, or a place a ledger URL gives), opened
    for reading; LedgerError when a folder has none."""
    place = session if isinstance(session, Place) else locate(session)
    if not place.exists():
        raise LedgerError(f"{place.label}: not a session folder (no {LEDGER_FILE})")
    return SessionLedger(place, read_only=True)


def export_records(
    session: str | Path | Place,
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


def kept_id_range(session: str | Path | Place) -> tuple[int, int, int]:
    """(count, first id, last id) of the session's kept attempts."""
    with session_ledger(session) as ledger:
        return ledger.read(lambda tx: kept.id_range(tx, ledger.session))
