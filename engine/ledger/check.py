"""What a ledger changed outside this engine looks like, found before it is used: a table
or column this engine writes that is missing, or a value of another type than it writes
(text in an integer column, bytes in a text column, text that is not JSON in a JSON
column). SQLite only: a PostgreSQL ledger's column types are enforced by the server."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from engine.ledger import schema
from engine.ledger.connection import Tx
from engine.ledger.errors import LedgerError

JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "gate_results": ("checked", "errors", "artifact"),
    "conflicts": ("fields", "options", "proposal"),
    "resolutions": ("actions",),
    "choices": ("effect",),
    "failed_gates": ("gate_result",),
    "reviews": ("material",),
}
"""Columns this engine writes as JSON text and decodes when it reads them."""

UNCHECKED_TYPES = frozenset({"kept_outputs", "attempts", "warnings", "ledger_schema"})
"""Tables whose rows are not type-checked on opening: a damaged kept output is named and
left out by the commands that read it; attempts and warnings, the large tables, are checked
as they are read (``AttemptTypes``), not in a second pass."""

_STORAGE = {"INTEGER": "integer", "TEXT": "text", "BLOB": "blob", "REAL": "real"}


@functools.cache
def expected_schema() -> dict[str, tuple[tuple[str, str, bool], ...]]:
    """Every table this engine writes: its columns as (name, SQLite storage class, whether
    NULL is allowed), read from the migrations applied to an empty in-memory database."""
    db = sqlite3.connect(":memory:")
    try:
        for number in range(1, schema.VERSION + 1):
            for statement in schema.statements("sqlite", number):
                db.execute(statement)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: tuple(
                (str(name), _STORAGE[str(kind)], not notnull and not primary)
                for _, name, kind, notnull, _, primary in db.execute(f"PRAGMA table_info({table})")
            )
            for table in tables
            if table != "sqlite_sequence"
        }
    finally:
        db.close()


def _bad_value(table: str, name: str, storage: str, nullable: bool) -> tuple[str, str]:
    """(SQL true when column ``name`` holds what this engine never writes there, what it
    should hold)."""
    allowed = f"'{storage}', 'null'" if nullable else f"'{storage}'"
    condition = f'typeof("{name}") NOT IN ({allowed})'
    what = {"integer": "an integer", "text": "text", "blob": "bytes", "real": "a real"}[storage]
    if name in JSON_COLUMNS.get(table, ()):
        condition += f' OR ("{name}" IS NOT NULL AND NOT json_valid("{name}"))'
        what = "JSON text"
    return condition, what + ("" if not nullable else " or NULL")


def problem(tx: Tx, rows: bool) -> str | None:
    """What makes the SQLite ledger open in ``tx`` unusable by this engine, or None: a table
    or column it writes that is missing, or (with ``rows``) the first row of a table, but
    those of ``UNCHECKED_TYPES``, with a value of another type than the engine writes."""
    for table, columns in expected_schema().items():
        found = {r[1] for r in tx.all(f"PRAGMA table_info({table})")}
        if not found:
            return f"no such table: {table}"
        missing = [name for name, _, _ in columns if name not in found]
        if missing:
            return f"no column {', '.join(missing)} in table {table}"
        if not rows or table in UNCHECKED_TYPES:
            continue
        checks = [_bad_value(table, *column) for column in columns]
        cases = " ".join(f"WHEN {sql} THEN {n}" for n, (sql, _) in enumerate(checks))
        bad = tx.one(
            f"SELECT rowid, CASE {cases} END AS bad FROM {table} WHERE bad IS NOT NULL LIMIT 1"
        )
        if bad is not None:
            name = columns[bad[1]][0]
            return f"{table} row {bad[0]}: column {name} does not hold {checks[bad[1]][1]}"
    return None


_PYTHON_TYPES: dict[str, type] = {"integer": int, "text": str, "blob": bytes, "real": float}
_TYPE_NAMES: dict[type, str] = {
    int: "an integer",
    str: "text",
    bytes: "bytes",
    float: "a real",
    type(None): "NULL",
}


class AttemptTypes:
    """An attempts row as a dict, once its values are checked to be of the types this
    engine writes (a LedgerError from ``changed`` naming the row otherwise). The types of a
    row (which columns are NULL) take few forms: each form is checked once."""

    def __init__(self, names: Sequence[str], changed: Callable[[str], str]) -> None:
        expected = {
            name: (storage, nullable) for name, storage, nullable in expected_schema()["attempts"]
        }
        self.changed = changed
        self.names = names
        self.allowed: list[set[type]] = [
            (
                {_PYTHON_TYPES[expected[n][0]]} | ({type(None)} if expected[n][1] else set())
                if n in expected
                else {int, str, float, bytes, type(None)}
            )
            for n in names
        ]
        self.good: set[tuple[type, ...]] = set()

    def __call__(self, row: Sequence[Any]) -> dict[str, Any]:
        kinds = tuple(map(type, row))
        if kinds not in self.good:
            for name, kind, allowed in zip(self.names, kinds, self.allowed, strict=True):
                if kind not in allowed:
                    what = " or ".join(sorted(_TYPE_NAMES[t] for t in allowed))
                    raise LedgerError(
                        self.changed(
                            f"attempts row {row[self.names.index('id')]}: column {name} holds "
                            f"{_TYPE_NAMES.get(kind, kind.__name__)}, not {what}"
                        )
                    )
            self.good.add(kinds)
        record = dict(zip(self.names, row, strict=True))
        record["final"] = bool(record["final"])
        for flag in ("example_truncated", "tokens_estimated", "not_generated_estimated"):
            if record.get(flag) is not None:
                record[flag] = bool(record[flag])
        record.pop("token", None)
        return record
