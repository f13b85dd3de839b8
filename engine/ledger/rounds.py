"""Rounds: each block's counts per round (what rate-limit windows read) and the statuses
a round's blocks ended in (set by a choice, else derived from their attempts)."""

from __future__ import annotations

from typing import Any

from engine.ledger.attempts import now
from engine.ledger.connection import Tx


def put_count(tx: Tx, session: str, block: str, round_number: int, count: int, total: int) -> None:
    """Record (or replace) a round's count: a round evaluated again replaces its count,
    never adds to it."""
    tx.execute(
        "INSERT INTO round_counts (session, block, round, count, total, ts)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session, block, round) DO UPDATE SET"
        " count = excluded.count, total = excluded.total, ts = excluded.ts",
        (session, block, round_number, count, total, now()),
    )


def counts(
    tx: Tx, session: str, block: str, before: int | None = None
) -> list[tuple[int, int, int]]:
    """(round, count, total) recorded for ``block``, oldest round first (only rounds
    before ``before`` when given)."""
    sql = "SELECT round, count, total FROM round_counts WHERE session = ? AND block = ?"
    params: list[Any] = [session, block]
    if before is not None:
        sql += " AND round < ?"
        params.append(before)
    rows = tx.all(sql + " ORDER BY round", params)
    return [(int(r[0]), int(r[1]), int(r[2])) for r in rows]


def set_status(tx: Tx, session: str, block: str, round_number: int, status: str, ts: str) -> None:
    tx.execute(
        "INSERT INTO round_status (session, block, round, status, ts) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (session, block, round) DO UPDATE SET status = excluded.status,"
        " ts = excluded.ts",
        (session, block, round_number, status, ts),
    )


def status(tx: Tx, session: str, block: str, round_number: int) -> str | None:
    """The status a choice set for ``block`` in the round, or None."""
    row = tx.one(
        "SELECT status FROM round_status WHERE session = ? AND block = ? AND round = ?",
        (session, block, round_number),
    )
    return None if row is None else str(row[0])


def last_attempt(tx: Tx, session: str, block: str, round_number: int) -> tuple[str, bool] | None:
    """(status, final) of the block's latest attempt in the round, or None."""
    row = tx.one(
        "SELECT status, final FROM attempts WHERE session = ? AND block = ? AND round = ?"
        " ORDER BY id DESC LIMIT 1",
        (session, block, round_number),
    )
    return None if row is None else (str(row[0]), bool(row[1]))


def all_statuses(tx: Tx, session: str) -> list[dict[str, Any]]:
    return tx.dicts(
        "SELECT block, round, status, ts FROM round_status WHERE session = ? ORDER BY round, block",
        (session,),
    )


def accepted(tx: Tx, session: str, block: str) -> frozenset[int]:
    """Rounds whose output for ``block`` was accepted (passed or warned)."""
    rows = tx.all(
        "SELECT DISTINCT round FROM attempts WHERE session = ? AND block = ?"
        " AND round IS NOT NULL AND status IN ('pass', 'warn')",
        (session, block),
    )
    return frozenset(int(r[0]) for r in rows)
