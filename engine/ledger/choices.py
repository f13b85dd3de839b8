"""The user's choices on final decisions (`rules choose`): one row per choice, on the
attempt it answered (JSON columns as stored: text)."""

from __future__ import annotations

from typing import Any

from engine.ledger.connection import Tx

_OF_SESSION = "attempt_id IN (SELECT id FROM attempts WHERE session = ?)"


def of_item(tx: Tx, session: str, block: str, item: str) -> list[tuple[int, str, str | None]]:
    """(id, effect, text) of the item's choices, oldest first."""
    rows = tx.all(
        f"SELECT id, effect, text FROM choices WHERE block = ? AND item = ? AND {_OF_SESSION}"
        " ORDER BY id",
        (block, item, session),
    )
    return [(int(r[0]), r[1], r[2]) for r in rows]


def on_attempt(tx: Tx, attempt_id: int) -> dict[str, Any] | None:
    """The choice made on attempt ``attempt_id``, if any."""
    return tx.first("SELECT * FROM choices WHERE attempt_id = ?", (attempt_id,))


def insert(
    tx: Tx,
    attempt: dict[str, Any],
    option: str,
    label: str,
    effect: str,
    text: str | None,
    ts: str,
) -> None:
    tx.execute(
        "INSERT INTO choices (attempt_id, ts, block, item, round, option, label, effect, text)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            attempt["id"],
            ts,
            attempt["block"],
            attempt["item"],
            attempt["round"],
            option,
            label,
            effect,
            text,
        ),
    )


def all_of(tx: Tx, session: str) -> list[dict[str, Any]]:
    """Every choice of the session, oldest first."""
    return tx.dicts(f"SELECT * FROM choices WHERE {_OF_SESSION} ORDER BY id", (session,))
