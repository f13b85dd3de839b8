"""The statements of one transaction on a ledger, whichever database holds it.

SQL is written once with ``?`` parameters; ``Tx`` turns them into psycopg's ``%s``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from engine.ledger import schema

Row = tuple[Any, ...]


class Tx:
    """The statements of one transaction. ``retry`` is true when the transaction runs a
    second time after its connection was lost (its first run may have committed)."""

    def __init__(self, cursor: Any, dialect: schema.Dialect, retry: bool = False) -> None:
        self.cursor = cursor
        self.dialect = dialect
        self.retry = retry

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        self.cursor.execute(_sql(sql, self.dialect), params)
        return int(self.cursor.rowcount)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        self.cursor.execute(_sql(sql, self.dialect), params)
        row = self.cursor.fetchone()
        return None if row is None else tuple(row)

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters (a batch: one round trip per
        batch to a server, not one per row)."""
        if rows:
            self.cursor.executemany(_sql(sql, self.dialect), rows)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self.cursor.execute(_sql(sql, self.dialect), params)
        return [tuple(row) for row in self.cursor.fetchall()]

    def columns(self) -> list[str]:
        """The column names of the last query."""
        return [d[0] for d in self.cursor.description or ()]

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """The rows of a query, each as a dict of its columns."""
        rows = self.all(sql, params)
        names = self.columns()
        return [dict(zip(names, row, strict=True)) for row in rows]

    def first(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of a query as a dict, or None."""
        found = self.dicts(sql, params)
        return found[0] if found else None


@functools.lru_cache(maxsize=512)
def _sql(sql: str, dialect: schema.Dialect) -> str:
    return sql if dialect == "sqlite" else sql.replace("%", "%%").replace("?", "%s")
