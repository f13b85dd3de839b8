"""Conflicts between an output and context items, and their resolutions (JSON columns as
stored: text; the rules of what a conflict is live in engine.policy.conflicts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.ledger.connection import Tx


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("session", None)
    return row


def all_of(tx: Tx, session: str) -> list[dict[str, Any]]:
    """Every conflict of the session, as recorded."""
    rows = tx.dicts("SELECT * FROM conflicts WHERE session = ? ORDER BY id", (session,))
    return [_plain(r) for r in rows]


def get(tx: Tx, session: str, ref: str) -> dict[str, Any] | None:
    row = tx.first("SELECT * FROM conflicts WHERE session = ? AND ref = ?", (session, ref))
    return None if row is None else _plain(row)


def refs(tx: Tx, session: str) -> list[str]:
    rows = tx.all("SELECT ref FROM conflicts WHERE session = ? ORDER BY id", (session,))
    return [str(r[0]) for r in rows]


def status(tx: Tx, session: str, ref: str) -> str | None:
    row = tx.one("SELECT status FROM conflicts WHERE session = ? AND ref = ?", (session, ref))
    return None if row is None else str(row[0])


def resolution(tx: Tx, conflict_id: int) -> dict[str, Any] | None:
    """The conflict's latest resolution."""
    return tx.first(
        "SELECT * FROM resolutions WHERE conflict_id = ? ORDER BY id DESC", (conflict_id,)
    )


def insert(tx: Tx, session: str, ref: str, values: Sequence[Any], created: str) -> None:
    """A new conflict: ``values`` are (pack, block, type, status, severity, round, number,
    fields, options, updated)."""
    tx.execute(
        "INSERT INTO conflicts (pack, block, type, status, severity, round, number, fields,"
        " options, updated, session, ref, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*values, session, ref, created),
    )


def replace(tx: Tx, session: str, ref: str, values: Sequence[Any]) -> None:
    """An open conflict or a flag recorded again (``values`` as ``insert``'s)."""
    tx.execute(
        "UPDATE conflicts SET pack = ?, block = ?, type = ?, status = ?, severity = ?,"
        " round = ?, number = ?, fields = ?, options = ?, updated = ?, proposal = NULL"
        " WHERE session = ? AND ref = ?",
        (*values, session, ref),
    )


UPDATABLE = frozenset({"status", "converted", "options", "proposal"})


def update(tx: Tx, session: str, ref: str, updated: str, **values: Any) -> None:
    assert set(values) <= UPDATABLE
    columns = ", ".join(f"{name} = ?" for name in values)
    tx.execute(
        f"UPDATE conflicts SET {columns}, updated = ? WHERE session = ? AND ref = ?",
        (*values.values(), updated, session, ref),
    )


def resolve(
    tx: Tx, session: str, conflict_id: int, ref: str, values: Sequence[Any], status: str, ts: str
) -> None:
    """Record a resolution (``values``: option, decision, rationale, constraints, actions,
    decided_by, decided_at) and mark the conflict ``status``."""
    tx.execute(
        "INSERT INTO resolutions (conflict_id, option, decision, rationale, constraints,"
        " actions, decided_by, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (conflict_id, *values),
    )
    update(tx, session, ref, ts, status=status)


def latest_pack(tx: Tx, session: str) -> str | None:
    """The pack that recorded the latest conflict, or None."""
    row = tx.one(
        "SELECT pack FROM conflicts WHERE session = ? ORDER BY id DESC LIMIT 1", (session,)
    )
    return None if row is None else str(row[0])
