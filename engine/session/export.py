"""Kept outputs of a session as `--jsonl` records, for `rules export` and backtests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger.errors import LedgerError
from engine.session.ledger import LEDGER_FILE, Ledger, kept_records

BATCH = 1000


def session_ledger(session_dir: str | Path) -> Ledger:
    """The ledger of an existing session folder; LedgerError when it has none."""
    folder = Path(session_dir)
    if not (folder / LEDGER_FILE).is_file():
        raise LedgerError(f"{folder}: not a session folder (no {LEDGER_FILE})")
    return Ledger.read_only(folder)


def export_records(
    session_dir: str | Path,
    after: int = 0,
    until: int | None = None,
    max_text_bytes: int = MAX_OUTPUT_BYTES,
) -> Iterator[dict[str, Any]]:
    """The session's kept attempts as records (block, text, nonce, vars, context, attempt;
    the id is the attempt's id in the ledger), oldest first, ids in ``(after, until]``;
    read in batches, so memory stays constant. A damaged one is ``{"id", "damaged"}``
    (``kept_records``)."""
    with session_ledger(session_dir) as ledger:
        while True:
            batch = list(kept_records(ledger, after, BATCH, max_text_bytes))
            for record in batch:
                if until is not None and record["id"] > until:
                    return
                yield record
            if len(batch) < BATCH:
                return
            after = batch[-1]["id"]


def kept_id_range(session_dir: str | Path) -> tuple[int, int, int]:
    """(count, first id, last id) of the session's kept attempts."""
    with session_ledger(session_dir) as ledger:
        row = ledger.db.execute(
            "SELECT COUNT(*), MIN(attempt_id), MAX(attempt_id) FROM kept_outputs"
        ).fetchone()
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)
