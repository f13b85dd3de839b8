"""Copying sessions from one ledger to another, on either backend, losslessly.

Which tables a session's rows live in is read from the schema (``schema.MIGRATIONS``), so a
table added by a later migration is copied too: a table with a ``session`` column holds the
rows of its session; a table without one belongs to a session through a column that
references the ``id`` of such a table (``warnings.attempt_id`` → ``attempts``, at any
depth). A table that is neither is refused by name: the copy would not know which of its
rows to take.

Rows are copied as they are: ids kept (so references between tables hold), blobs byte for
byte, all sessions read in one snapshot of the source (``Ledger.snapshot``: REPEATABLE READ
on PostgreSQL, one read transaction on SQLite; writers may go on meanwhile) and written in
one transaction on the target. When an id of the copy is already taken
in the target (by another session), every id of that table is moved past the target's
largest one, and the references to them with it; likewise a write token (``attempts.token``,
unique across a ledger) already taken there is replaced by a new one. On PostgreSQL the
identity sequences are advanced past the copied ids, so later inserts do not collide.
"""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.ledger import schema
from engine.ledger.connection import Ledger, Row, Tx
from engine.ledger.errors import LedgerError

OWN_TABLES = frozenset(
    {"ledger_schema", "budget_counters", "budget_spend", "breaker_states", "breaker_outcomes"}
)
"""Tables of the ledger itself, not of any session: never copied (what a fleet spent stays
with the fleet's ledger)."""

_CREATE = re.compile(r"\s*CREATE TABLE (\w+) \((.*)\)\s*$", re.DOTALL)
_ADD = re.compile(r"\s*ALTER TABLE (\w+) ADD COLUMN (.*)$", re.DOTALL)
_DROP = re.compile(r"\s*DROP TABLE (?:IF EXISTS )?(\w+)")
_REF = re.compile(r"(\w+) \{ref\}[^,]*?REFERENCES (\w+) \(id\)")
_ID = re.compile(r"(?:^|[\s,(])id \{id\}")


@dataclass(frozen=True)
class Table:
    """A table a session's rows live in: whether it has the ``session`` column and an
    ``id`` the ledger allocates, and its columns that reference ids of other tables."""

    name: str
    session: bool
    ids: bool
    refs: tuple[tuple[str, str], ...] = ()  # (column, referenced table)


@dataclass
class Copied:
    """What one session's copy wrote: rows per table, and the tables whose ids moved."""

    session: str
    target: str
    rows: dict[str, int] = field(default_factory=dict)
    moved: dict[str, int] = field(default_factory=dict)  # table -> added to each id


def session_tables(migrations: Sequence[Sequence[str]] = schema.MIGRATIONS) -> list[Table]:
    """The tables of the schema that hold a session's rows, referenced tables first; a
    LedgerError naming a table that holds rows of no session the copy can tell."""
    found: dict[str, Table] = {}
    for statement in (s for migration in migrations for s in migration):
        if created := _CREATE.match(statement):
            name, body = created.groups()
            found[name] = Table(
                name, "{session}" in body, _ID.search(body) is not None, _refs(body)
            )
        elif added := _ADD.match(statement):
            name, column = added.groups()
            old = found[name]
            found[name] = Table(
                name,
                old.session or "{session}" in column or column.startswith("session "),
                old.ids,
                old.refs + _refs(column),
            )
        elif dropped := _DROP.match(statement):
            found.pop(dropped.group(1), None)
    ordered: list[Table] = []
    placed: set[str] = set()
    waiting = [t for name, t in found.items() if name not in OWN_TABLES]
    while waiting:
        ready = [t for t in waiting if _placeable(t, placed)]
        if not ready:
            names = ", ".join(t.name for t in waiting)
            raise LedgerError(
                f"the ledger table(s) {names} have no session column and no reference to a "
                "table that has one: a copy cannot tell which of their rows belong to a "
                "session; nothing was copied (give such a table a session column in "
                "engine/ledger/schema.py)"
            )
        ordered += ready
        placed |= {t.name for t in ready}
        waiting = [t for t in waiting if t.name not in placed]
    return ordered


def _refs(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((column, table) for column, table in _REF.findall(text))


def _placeable(table: Table, placed: set[str]) -> bool:
    """Whether every table ``table`` references is placed, and it belongs to a session."""
    if not all(parent in placed for _, parent in table.refs):
        return False
    return table.session or bool(table.refs)


def _where(table: Table, tables: dict[str, Table]) -> str:
    """The condition selecting one session's rows of ``table`` (one ``?``: the session)."""
    if table.session:
        return "session = ?"
    column, parent = table.refs[0]
    return f"{column} IN (SELECT id FROM {parent} WHERE {_where(tables[parent], tables)})"


Snapshot = dict[str, tuple[list[str], list[Row]]]  # table -> (columns, rows)


def sessions(ledger: Ledger, tables: Sequence[Table] | None = None) -> list[str]:
    """The names of the sessions with rows in ``ledger``, sorted."""
    chosen = session_tables() if tables is None else tables
    return ledger.read(lambda tx: _names(tx, chosen))


def _names(tx: Tx, tables: Sequence[Table]) -> list[str]:
    names: set[str] = set()
    for table in tables:
        if table.session:
            names |= {str(r[0]) for r in tx.all(f"SELECT DISTINCT session FROM {table.name}")}
    return sorted(names)


def read_session(ledger: Ledger, session: str, tables: Sequence[Table] | None = None) -> Snapshot:
    """Every row of ``session`` in ``ledger``, by table, in one snapshot of the ledger."""
    chosen = session_tables() if tables is None else tables
    return ledger.snapshot(lambda tx: _rows(tx, session, chosen))


def _rows(tx: Tx, session: str, tables: Sequence[Table]) -> Snapshot:
    by_name = {t.name: t for t in tables}
    out: Snapshot = {}
    for table in tables:
        rows = tx.all(
            f"SELECT * FROM {table.name} WHERE {_where(table, by_name)} ORDER BY 1",
            (session,),
        )
        out[table.name] = (tx.columns(), [_plain(row) for row in rows])
    return out


def read_sessions(
    ledger: Ledger, session: str | None, tables: Sequence[Table]
) -> list[tuple[str, Snapshot]]:
    """The rows of ``session`` (of every session when None), by session and table, all
    read in one snapshot of ``ledger``: writers committing meanwhile change none of it, so
    an item's counter matches its attempts and every warning's attempt is in the copy."""

    def work(tx: Tx) -> list[tuple[str, Snapshot]]:
        names = [session] if session is not None else _names(tx, tables)
        return [(name, _rows(tx, name, tables)) for name in names]

    return ledger.snapshot(work)


def _plain(row: Row) -> Row:
    """A row with a driver's buffer types (memoryview) as bytes."""
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)


def copy_sessions(
    source: Ledger,
    target: Ledger,
    session: str | None = None,
    as_name: str | None = None,
    replace: bool = False,
) -> list[Copied]:
    """Copy ``session`` (every session of ``source`` when None) into ``target`` in one
    transaction, as ``as_name`` when given (one session only). A session that already has
    rows in ``target`` is refused (nothing is written) unless ``replace``, which first
    deletes its rows there."""
    tables = session_tables()
    snapshots = read_sessions(source, session, tables)
    names = [name for name, _ in snapshots]
    if as_name is not None and len(names) != 1:
        raise LedgerError(
            f"{source.url}: holds {len(names)} sessions ({', '.join(map(repr, names))}); "
            "a new name (--as) is for one session: name it with --session"
        )
    if session is not None and not any(rows for _, rows in snapshots[0][1].values()):
        raise LedgerError(f"{source.url}: no session {session!r} there; nothing was copied")

    def work(tx: Tx) -> list[Copied]:
        return [
            _write(
                tx,
                tables,
                name,
                name if as_name is None else as_name,
                snapshot,
                replace,
                str(target.url),
            )
            for name, snapshot in snapshots
        ]

    try:
        return target.write(work)
    except sqlite3.DatabaseError as exc:  # a constraint of the target (a ledger edited by hand)
        raise LedgerError(f"{target.url}: {exc}; nothing was copied") from None


def _counts(tx: Tx, tables: Sequence[Table], name: str) -> dict[str, int]:
    by_name = {t.name: t for t in tables}
    counts = {}
    for table in tables:
        row = tx.one(f"SELECT count(*) FROM {table.name} WHERE {_where(table, by_name)}", (name,))
        counts[table.name] = int(row[0]) if row else 0
    return counts


def _write(
    tx: Tx,
    tables: Sequence[Table],
    source: str,
    name: str,
    snapshot: Snapshot,
    replace: bool,
    where: str,
) -> Copied:
    by_name = {t.name: t for t in tables}
    copied = Copied(source, name, {t: len(rows) for t, (_, rows) in snapshot.items()})
    present = {t: n for t, n in _counts(tx, tables, name).items() if n}
    if present and tx.retry and present == {t: n for t, n in copied.rows.items() if n}:
        return copied  # the first run committed before its connection was lost
    if present and not replace:
        held = ", ".join(f"{n} {t}" for t, n in present.items())
        raise LedgerError(
            f"{where}: session {name!r} already has rows there ({held}); nothing was "
            "copied: give --replace to overwrite it, or --as NAME to copy it under another name"
        )
    for table in reversed(tables):  # rows referring to others go first
        tx.execute(f"DELETE FROM {table.name} WHERE {_where(table, by_name)}", (name,))
    for table in tables:
        columns, rows = snapshot[table.name]
        if table.ids and rows:
            copied.moved[table.name] = _offset(tx, table.name, columns, rows)
    for table in tables:
        columns, rows = snapshot[table.name]
        shifts = {columns.index("id"): copied.moved.get(table.name, 0)} if table.ids else {}
        for column, parent in table.refs:
            shifts[columns.index(column)] = copied.moved.get(parent, 0)
        at_session = columns.index("session") if table.session else -1
        at_token = columns.index("token") if "token" in columns else -1
        taken = (
            _taken_tokens(tx, table.name, [row[at_token] for row in rows])
            if at_token >= 0
            else set()
        )
        out = []
        for row in rows:
            values = list(row)
            for at, shift in shifts.items():
                if shift and values[at] is not None:
                    values[at] = int(values[at]) + shift
            if at_session >= 0:
                values[at_session] = name
            if at_token >= 0 and values[at_token] in taken:
                values[at_token] = uuid.uuid4().hex  # tokens are unique across a ledger
            out.append(values)
        marks = ", ".join("?" for _ in columns)
        tx.many(f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})", out)
        if table.ids and rows and tx.dialect == "postgresql":
            _advance_identity(tx, table.name)
    copied.moved = {t: n for t, n in copied.moved.items() if n}
    return copied


def _taken_tokens(tx: Tx, table: str, tokens: list[object]) -> set[object]:
    """The write tokens of the copy that rows of ``table`` in the target already hold (a
    copy of the same rows under another name)."""
    wanted = [t for t in tokens if t is not None]
    taken: set[object] = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        taken |= {
            r[0] for r in tx.all(f"SELECT token FROM {table} WHERE token IN ({marks})", chunk)
        }
    return taken


def _offset(tx: Tx, table: str, columns: list[str], rows: list[Row]) -> int:
    """0 when none of the copy's ids of ``table`` is taken in the target, else what moves
    them all past the target's largest id."""
    at = columns.index("id")
    ids = {int(row[at]) for row in rows}
    taken = tx.all(f"SELECT id FROM {table} WHERE id BETWEEN ? AND ?", (min(ids), max(ids)))
    if not ids & {int(r[0]) for r in taken}:
        return 0
    top = tx.one(f"SELECT max(id) FROM {table}")
    return int(top[0]) if top and top[0] is not None else 0


def _advance_identity(tx: Tx, table: str) -> None:
    """Move the identity sequence of ``table`` past its largest id (never back)."""
    row = tx.one("SELECT pg_get_serial_sequence(?, 'id')", (table,))
    if row is None or row[0] is None:
        raise LedgerError(f"table {table}: its id has no identity sequence; nothing was copied")
    sequence = str(row[0])  # a name the server gave, already quoted
    tx.one(
        f"SELECT setval(?::regclass, GREATEST((SELECT max(id) FROM {table}),"
        f" (SELECT last_value FROM {sequence})), true)",
        (sequence,),
    )
