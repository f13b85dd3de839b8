"""Session settings: a key and its text value per session (e.g. keeping outputs, a pause)."""

from __future__ import annotations

from engine.ledger.connection import Tx


def get(tx: Tx, session: str, key: str) -> str | None:
    row = tx.one("SELECT value FROM settings WHERE session = ? AND key = ?", (session, key))
    return None if row is None else str(row[0])


def put(tx: Tx, session: str, key: str, value: str) -> None:
    tx.execute(
        "INSERT INTO settings (session, key, value) VALUES (?, ?, ?)"
        " ON CONFLICT (session, key) DO UPDATE SET value = excluded.value",
        (session, key, value),
    )


def delete(tx: Tx, session: str, key: str) -> None:
    tx.execute("DELETE FROM settings WHERE session = ? AND key = ?", (session, key))
