"""The statements of one transaction on a ledger, whichever database holds it.

SQL is written once with ``?`` parameters; ``Tx`` turns them into psycopg's ``%s``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from engine.ledger import schema

Row = tuple[Any, ...]
Statement = tuple[str, Sequence[Any]]
"""One statement and its parameters."""


class Tx:
    """The statements of one transaction. ``retry`` is true when the transaction runs a
    second time after its connection was lost (its first run may have committed)."""

    def __init__(self, cursor: Any, dialect: schema.Dialect, retry: bool = False) -> None:
        self.cursor = cursor
        self.dialect = dialect
        self.retry = retry
        self.pending: list[Statement] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; the number of rows it changed."""
        if self.pending:
            return self._with_pending((sql, params))[1]
        self.cursor.execute(_sql(sql, self.dialect), params)
        return int(self.cursor.rowcount)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        if self.pending:
            rows = self._with_pending((sql, params))[0]
            return rows[0] if rows else None
        self.cursor.execute(_sql(sql, self.dialect), params)
        row = self.cursor.fetchone()
        return None if row is None else tuple(row)

    def later(self, statements: Sequence[Statement]) -> None:
        """Run ``statements``, whose results nobody reads, with the next statement of this
        transaction (on PostgreSQL: in the same round trip), or before it commits
        (``flush``). Only for writes to rows nothing reads before then."""
        if self.dialect == "sqlite":  # no round trip to save
            self.batch(statements)
        else:
            self.pending += statements

    def flush(self) -> None:
        """Run what ``later`` kept (the transaction calls it before it commits)."""
        if self.pending:
            self.batch([])

    def _with_pending(self, statement: Statement) -> tuple[list[Row], int]:
        """``statement`` run after what ``later`` kept: its rows and changed-row count."""
        found = self._pipeline([*self.pending, statement])
        self.pending = []
        return found[-1]

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters (a batch: one round trip per
        batch to a server, not one per row)."""
        self.flush()
        if rows:
            self.cursor.executemany(_sql(sql, self.dialect), rows)

    def batch(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """Run ``statements`` in order, none needing another's result; the rows of each
        (none for a statement that returns none). On PostgreSQL they go to the server in
        one round trip (a pipeline, with what ``later`` kept before them), where they
        still run one after the other, each taking its snapshot when it starts (READ
        COMMITTED): a statement sees what the transactions that held a row before an
        earlier one took it wrote."""
        if self.dialect == "sqlite":
            found = []
            for sql, params in statements:
                self.cursor.execute(_sql(sql, self.dialect), params)
                rows = self.cursor.fetchall() if self.cursor.description else []
                found.append([tuple(row) for row in rows])
            return found
        kept, self.pending = self.pending, []
        results = self._pipeline([*kept, *statements])
        return [rows for rows, _ in results[len(kept) :]]

    def _pipeline(self, statements: Sequence[Statement]) -> list[tuple[list[Row], int]]:
        """PostgreSQL: ``statements`` in one round trip; each one's rows and changed-row
        count."""
        if not statements:
            return []
        if len(statements) == 1:
            sql, params = statements[0]
            self.cursor.execute(_sql(sql, self.dialect), params)
            rows = self.cursor.fetchall() if self.cursor.description else []
            return [([tuple(row) for row in rows], int(self.cursor.rowcount))]
        connection = self.cursor.connection
        # the last statement on this transaction's own cursor: ``columns`` describes it
        cursors = [connection.cursor() for _ in statements[:-1]] + [self.cursor]
        with connection.pipeline():
            for cursor, (sql, params) in zip(cursors, statements, strict=True):
                cursor.execute(_sql(sql, self.dialect), params)
        results = []
        for cursor in cursors:
            rows = cursor.fetchall() if cursor.description else []
            results.append(([tuple(row) for row in rows], int(cursor.rowcount)))
            if cursor is not self.cursor:
                cursor.close()
        return results

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        if self.pending:
            return self._with_pending((sql, params))[0]
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
