"""Session-folder ledgers as the engine before the shared ledger wrote them (its schema:
``engine.ledger.legacy.MIGRATIONS``, ``PRAGMA user_version`` 1..7), with a row in every
table, and what the converted ledger holds of them."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path
from typing import Any

from engine.ledger.connection import APPLICATION_ID
from engine.ledger.legacy import MIGRATIONS

ROWS: dict[str, list[tuple[Any, ...]]] = {
    "attempts": [
        (1, "2026-01-01T00:00:00Z", "sentinel", "VERDICT", '{"i": 1}', None, 1, "fail",
         "PARSE_ERROR", "bad", "REPAIR", "r", "x", 0, "4F2C9A", "m", "a" * 64, 3),
        (2, "2026-01-01T00:00:01Z", "sentinel", "VERDICT", '{"i": 1}', 3, 2, "pass",
         None, None, "PROCEED", "ok", "y", 1, "4F2C9A", None, "b" * 64, 5),
    ],
    "warnings": [(1, 2, "2026-01-01T00:00:01Z", "a warning")],
    "gate_results": [
        (1, "2026-01-01T00:00:02Z", "quality-gate", "IMPLEMENT", 0, 0, "REPROMPT", "why",
         '["todo"]', '["e"]', "c" * 64, None),
    ],
    "round_counts": [("engineer", 3, 2, 5, "2026-01-01T00:00:03Z")],
    "conflicts": [
        (1, "ID-1", "p", "B", "explicit", 0, "resolved", "HIGH", 3, 1, '{"a": 1}', "[]",
         None, "2026-01-01T00:00:04Z", "2026-01-01T00:00:05Z"),
    ],
    "resolutions": [(1, 1, "A", "d", "why", "", "{}", "User", "2026-01-01T00:00:05Z")],
    "kept_outputs": [(2, '{"criterion": "AC1"}', "{}", zlib.compress(b"kept text"))],
    "settings": [("keep_outputs", "1")],
    "choices": [
        (1, 1, "2026-01-01T00:00:06Z", "VERDICT", '{"i": 1}', None, "1", "Skip", "{}", None),
    ],
    "round_status": [("VERDICT", 3, "skipped", "2026-01-01T00:00:06Z")],
}  # fmt: skip

TABLE_OF_VERSION = {
    "attempts": 1, "warnings": 1, "gate_results": 3, "round_counts": 4, "conflicts": 5,
    "resolutions": 5, "kept_outputs": 6, "settings": 6, "choices": 7, "round_status": 7,
}  # fmt: skip


def columns(db: sqlite3.Connection, table: str, count: int) -> list[str]:
    return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})")][:count]


def write_legacy(path: Path, version: int = len(MIGRATIONS)) -> dict[str, list[tuple[Any, ...]]]:
    """A ledger of the earlier format at schema ``version`` with ``ROWS`` in its tables;
    the rows written, by table (as ``kept_rows`` reads them back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[tuple[Any, ...]]] = {}
    with sqlite3.connect(path) as db:
        for migration in MIGRATIONS[:version]:
            for statement in migration:
                db.execute(statement)
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        db.execute(f"PRAGMA user_version = {version}")
        for table, rows in ROWS.items():
            if TABLE_OF_VERSION[table] > version:
                continue
            names = columns(db, table, len(rows[0]))
            marks = ", ".join("?" for _ in names)
            db.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", rows)
            written[table] = rows
    db.close()
    return written


def kept_rows(path: Path, written: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[Any]]:
    """The rows of ``written``'s tables and columns as the ledger at ``path`` holds them,
    with the session each belongs to (when the table has that column)."""
    out: dict[str, list[Any]] = {}
    with sqlite3.connect(path) as db:
        for table, rows in written.items():
            names = [n for n in _legacy_columns(table) if n != "session"][: len(rows[0])]
            has_session = "session" in columns(db, table, 99)
            selected = ", ".join(names + (["session"] if has_session else []))
            found = db.execute(f"SELECT {selected} FROM {table} ORDER BY rowid").fetchall()
            out[table] = [
                (tuple(r[: len(names)]), r[len(names)] if has_session else "") for r in found
            ]
    db.close()
    return out


def _legacy_columns(table: str) -> list[str]:
    db = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        for statement in migration:
            db.execute(statement)
    names = columns(db, table, 99)
    db.close()
    return names


def expected(written: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[Any]]:
    """``written`` as ``kept_rows`` finds it after the conversion: every row, session ''."""
    return {table: [(row, "") for row in rows] for table, rows in written.items()}
