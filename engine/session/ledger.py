"""The ledger: attempt history, decisions and warnings of a session, in SQLite.

One database file per session folder (``ledger.sqlite3``), WAL mode, a schema versioned by
``PRAGMA user_version`` with forward migrations, and an ``application_id`` so a foreign or
corrupt file is recognised and never overwritten. Opening (recognise, switch to WAL,
migrate) is serialised across processes by an advisory lock on ``ledger.lock``, so a process
never sees a ledger half created by another. Writers serialise on ``BEGIN IMMEDIATE``;
concurrent processes lose no row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core import clock
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger.connection import BUSY_TIMEOUT_MS, opening_lock
from engine.ledger.errors import LedgerError

LEDGER_FILE = "ledger.sqlite3"
LOCK_FILE = "ledger.lock"
APPLICATION_ID = 0x52554C45  # "RULE"

MIGRATIONS: list[str] = [
    # 1: attempts with their decision, and warnings
    """
    CREATE TABLE attempts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts TEXT NOT NULL,
        pack TEXT NOT NULL,
        block TEXT NOT NULL,
        item TEXT NOT NULL,
        round INTEGER,
        attempt INTEGER NOT NULL,
        status TEXT NOT NULL,
        failure_type TEXT,
        error TEXT,
        action TEXT NOT NULL,
        reason TEXT NOT NULL,
        rule TEXT NOT NULL,
        final INTEGER NOT NULL,
        nonce TEXT,
        model TEXT,
        output_sha256 TEXT NOT NULL,
        output_chars INTEGER NOT NULL,
        prompt_sha256 TEXT,
        example_tier TEXT,
        example_chars INTEGER,
        example_truncated INTEGER
    );
    CREATE INDEX attempts_item ON attempts (block, item, id);
    CREATE TABLE warnings (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        attempt_id INTEGER NOT NULL REFERENCES attempts (id),
        ts TEXT NOT NULL,
        message TEXT NOT NULL
    );
    """,
    # 2: which validation tier failed, and what went into the next prompt
    """
    ALTER TABLE attempts ADD COLUMN validation TEXT;
    ALTER TABLE attempts ADD COLUMN data_summary TEXT;
    ALTER TABLE attempts ADD COLUMN modification TEXT;
    ALTER TABLE attempts ADD COLUMN example_source TEXT;
    ALTER TABLE attempts ADD COLUMN example_tokens INTEGER;
    ALTER TABLE attempts ADD COLUMN example_original_chars INTEGER;
    """,
    # 3: results of quality gates (one row per run of a gate)
    """
    CREATE TABLE gate_results (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts TEXT NOT NULL,
        pack TEXT NOT NULL,
        gate TEXT NOT NULL,
        retry INTEGER NOT NULL,
        valid INTEGER NOT NULL,
        action TEXT NOT NULL,
        reason TEXT NOT NULL,
        checked TEXT NOT NULL,
        errors TEXT NOT NULL,
        reprompt_sha256 TEXT,
        artifact TEXT
    );
    CREATE INDEX gate_results_gate ON gate_results (gate, id);
    """,
    # 4: per-round counts of a block's rate limits (one row per block and round)
    """
    CREATE TABLE round_counts (
        block TEXT NOT NULL,
        round INTEGER NOT NULL,
        count INTEGER NOT NULL,
        total INTEGER NOT NULL,
        ts TEXT NOT NULL,
        PRIMARY KEY (block, round)
    );
    """,
    # 5: conflicts between an output and context items, and their resolutions
    """
    CREATE TABLE conflicts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ref TEXT NOT NULL UNIQUE,
        pack TEXT NOT NULL,
        block TEXT NOT NULL,
        type TEXT NOT NULL,
        converted INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        severity TEXT NOT NULL,
        round INTEGER,
        number INTEGER NOT NULL,
        fields TEXT NOT NULL,
        options TEXT NOT NULL,
        proposal TEXT,
        created TEXT NOT NULL,
        updated TEXT NOT NULL
    );
    CREATE TABLE resolutions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conflict_id INTEGER NOT NULL REFERENCES conflicts(id),
        option TEXT NOT NULL,
        decision TEXT NOT NULL,
        rationale TEXT NOT NULL,
        constraints TEXT NOT NULL,
        actions TEXT NOT NULL,
        decided_by TEXT NOT NULL,
        decided_at TEXT NOT NULL
    );
    """,
    # 6: kept outputs (opt-in, `--keep-outputs`): the evaluated text (zlib) and what a replay
    # needs besides the attempt's row; session settings.
    """
    CREATE TABLE kept_outputs (
        attempt_id INTEGER PRIMARY KEY REFERENCES attempts (id),
        vars TEXT NOT NULL,
        context TEXT NOT NULL,
        output BLOB NOT NULL
    );
    CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 7: the user's choices on final decisions (`rules choose`) and round statuses.
    """
    CREATE TABLE choices (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        attempt_id INTEGER NOT NULL REFERENCES attempts (id),
        ts TEXT NOT NULL,
        block TEXT NOT NULL,
        item TEXT NOT NULL,
        round INTEGER,
        option TEXT NOT NULL,
        label TEXT NOT NULL,
        effect TEXT NOT NULL,
        text TEXT
    );
    CREATE TABLE round_status (
        block TEXT NOT NULL,
        round INTEGER NOT NULL,
        status TEXT NOT NULL,
        ts TEXT NOT NULL,
        PRIMARY KEY (block, round)
    );
    """,
]


JSON_COLUMNS: dict[str, tuple[str, ...]] = {
    "gate_results": ("checked", "errors", "artifact"),
    "conflicts": ("fields", "options", "proposal"),
    "resolutions": ("actions",),
    "choices": ("effect",),
}
"""Columns this engine writes as JSON text and decodes when it reads them."""

UNCHECKED_TYPES = frozenset({"kept_outputs", "attempts", "warnings"})
"""Tables whose rows are not type-checked on opening: a damaged kept output is named and
left out by the commands that read it (``kept_records``); attempts and warnings, the large
tables, are checked as they are read (``Ledger.attempt_rows``), not in a second pass."""

_STORAGE = {"INTEGER": "integer", "TEXT": "text", "BLOB": "blob"}


@functools.cache
def expected_schema() -> dict[str, tuple[tuple[str, str, bool], ...]]:
    """Every table this engine writes: its columns as (name, SQLite storage class, whether
    NULL is allowed), read from the migrations applied to an empty in-memory database."""
    db = sqlite3.connect(":memory:")
    try:
        for migration in MIGRATIONS:
            db.executescript(migration)
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
    what = {"integer": "an integer", "text": "text", "blob": "bytes"}[storage]
    if name in JSON_COLUMNS.get(table, ()):
        condition += f' OR ("{name}" IS NOT NULL AND NOT json_valid("{name}"))'
        what = "JSON text"
    return condition, what + ("" if not nullable else " or NULL")


def check_schema(db: sqlite3.Connection, rows: bool) -> str | None:
    """What makes ``db`` unusable by this engine, or None: a table or column it writes that
    is missing, or (with ``rows``) the first row of a table, but kept outputs, with a value
    of another type than the engine writes (text in an integer column, bytes in a text
    column, text that is not JSON in a JSON column)."""
    for table, columns in expected_schema().items():
        found = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if not found:
            return f"no such table: {table}"
        missing = [name for name, _, _ in columns if name not in found]
        if missing:
            return f"no column {', '.join(missing)} in table {table}"
        if not rows or table in UNCHECKED_TYPES:
            continue
        checks = [_bad_value(table, *column) for column in columns]
        cases = " ".join(f"WHEN {sql} THEN {n}" for n, (sql, _) in enumerate(checks))
        bad = db.execute(
            f"SELECT rowid, CASE {cases} END AS bad FROM {table} WHERE bad IS NOT NULL LIMIT 1"
        ).fetchone()
        if bad is not None:
            name = columns[bad[1]][0]
            return f"{table} row {bad[0]}: column {name} does not hold {checks[bad[1]][1]}"
    return None


def now() -> str:
    """ISO 8601 UTC with seconds, e.g. 2026-01-12T14:30:00Z (seed 003 §6); SOURCE_DATE_EPOCH
    fixes it (engine.core.clock)."""
    return clock.iso(clock.now())


def sha256(data: str | bytes) -> str:
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True)
class AttemptRecord:
    """One evaluated output and what was decided, as stored."""

    pack: str
    block: str
    item: str
    attempt: int
    status: str
    action: str
    reason: str
    rule: str
    final: bool
    output_sha256: str
    output_chars: int
    round: int | None = None
    failure_type: str | None = None
    error: str | None = None
    nonce: str | None = None
    model: str | None = None
    validation: str | None = None
    data_summary: str | None = None


@dataclass(frozen=True)
class GateRecord:
    """One run of a quality gate, as stored."""

    ts: str
    pack: str
    gate: str
    retry: int
    valid: bool
    action: str
    reason: str
    checked: Sequence[str]
    errors: Sequence[str]
    reprompt_sha256: str | None = None
    artifact: Mapping[str, Any] | None = None


class Ledger:
    """The ledger of one session folder."""

    def __init__(self, session_dir: Path) -> None:
        self.path = session_dir / LEDGER_FILE
        try:
            session_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"{session_dir}: cannot create the session folder: {exc.strerror or exc}"
            ) from None
        with opening_lock(
            session_dir / LOCK_FILE,
            "recording in a session needs write access to {folder} (`rules log` only reads it)",
        ):
            existed = self.path.exists() and self.path.stat().st_size > 0
            try:
                self.db = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
                )
                self.db.row_factory = sqlite3.Row
                self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._open(existed)
            except sqlite3.DatabaseError as exc:
                raise LedgerError(
                    f"{self.path}: not a usable ledger ({exc}); it was left as "
                    "it is: move it away or choose another --session"
                ) from None

    @classmethod
    def read_only(cls, session_dir: Path) -> Ledger:
        """The ledger opened for reading only (SQLite ``mode=ro``): nothing is created,
        migrated or locked, so a ledger on read-only media can be read. Readers (`rules
        log`, `rules export`, `rules report`) use this; only writers need write access.
        A ledger of an older schema is upgraded first when the folder is writable.
        """
        path = session_dir / LEDGER_FILE
        if not path.is_file():
            raise LedgerError(f"{session_dir}: no ledger here")
        uri = path.resolve().as_uri()
        failure: sqlite3.DatabaseError | None = None
        # immutable=1 reads a WAL ledger whose folder cannot hold the -shm index
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(uri + query, uri=True, isolation_level=None)
                db.row_factory = sqlite3.Row
                version = db.execute("PRAGMA user_version").fetchone()[0]
                app_id = db.execute("PRAGMA application_id").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                failure = exc
                continue
            if app_id != APPLICATION_ID:
                db.close()
                raise LedgerError(f"{path}: this SQLite file is not a rules ledger")
            if version == len(MIGRATIONS):
                ledger = cls.__new__(cls)
                ledger.path, ledger.db = path, db
                return ledger.checked()
            db.close()
            if version < len(MIGRATIONS) and os.access(session_dir, os.W_OK):
                return cls(session_dir).checked()  # an older schema: a writer upgrades it
            raise LedgerError(
                f"{path}: schema {version}, this engine reads {len(MIGRATIONS)}; "
                + (
                    "a newer ledger needs a newer engine"
                    if version > len(MIGRATIONS)
                    else "upgrading it needs write access to the folder (any writer, "
                    "e.g. `rules eval --session`, upgrades it)"
                )
            )
        raise LedgerError(
            f"{path}: cannot be read ({failure}); reading needs only read access, "
            "so the file is damaged or not a ledger"
        )

    def _open(self, existed: bool) -> None:
        app_id = self.db.execute("PRAGMA application_id").fetchone()[0]
        tables = self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if existed and app_id != APPLICATION_ID and (tables or app_id):
            raise LedgerError(
                f"{self.path}: this SQLite file is not a rules ledger; it was "
                "left as it is: choose another --session folder"
            )
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable enough, much faster
        self._migrate()
        self.check(rows=False)

    def check(self, rows: bool) -> None:
        """LedgerError when the tables and columns this engine writes are not all there or,
        with ``rows``, a row holds a value of another type than it writes
        (``check_schema``): a ledger changed outside this engine."""
        problem = check_schema(self.db, rows)
        if problem is not None:
            raise LedgerError(self._changed(problem))

    def checked(self) -> Ledger:
        """This ledger once its rows are checked too (``check``); closed when they fail."""
        try:
            self.check(rows=True)
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)  # closes it; a damaged file is named
            raise
        return self

    def decoded(self, text: str, where: str) -> Any:
        """JSON text this engine stored at ``where`` (e.g. "choices row 3"), decoded; a
        LedgerError when it is not JSON or nested too deeply to decode."""
        try:
            return json.loads(text)
        except RecursionError:
            raise LedgerError(self._changed(f"{where}: JSON nested too deeply")) from None
        except (ValueError, TypeError) as exc:
            raise LedgerError(self._changed(f"{where}: {exc}")) from None

    def _changed(self, problem: object) -> str:
        return (
            f"{self.path}: not a usable ledger ({problem}); it was changed outside this "
            "engine: undo that change, or move the ledger away and start a new session"
        )

    def _migrate(self) -> None:
        with self.transaction():
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise LedgerError(
                    f"{self.path}: written by a newer engine (schema {version},"
                    f" this engine knows {len(MIGRATIONS)}); upgrade the engine"
                )
            for number in range(version, len(MIGRATIONS)):
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
            if version < len(MIGRATIONS):
                self.db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self.db.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no lost updates)."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise LedgerError(f"{self.path}: {exc}") from None
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, trace: object) -> None:
        """Close the ledger. A damaged file (a page that is not what SQLite wrote) leaves
        the block as a LedgerError naming it, not an internal error; so does any other
        SQLite error (a busy or locked ledger, a table changed outside this engine)."""
        self.close()
        if type(exc) is sqlite3.DatabaseError:
            raise LedgerError(
                f"{self.path}: cannot be read ({exc}); the file is damaged: "
                f"`sqlite3 {self.path} .recover` can save what is left"
            ) from None
        if isinstance(exc, sqlite3.OperationalError) and any(
            word in str(exc) for word in ("locked", "busy")
        ):
            raise LedgerError(
                f"{self.path}: {exc}: another process holds it; try again when it is done"
            ) from None
        if isinstance(exc, sqlite3.Error):
            raise LedgerError(self._changed(exc)) from None

    def setting(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["value"])

    def set_setting(self, key: str, value: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------ reads

    def history(self, block: str, item: str) -> list[sqlite3.Row]:
        return list(
            self.db.execute(
                "SELECT * FROM attempts WHERE block = ? AND item = ? ORDER BY id", (block, item)
            )
        )

    def latest_attempt_pack(self, block: str) -> str | None:
        """The pack recorded with the latest attempt of ``block``, or None (no attempt)."""
        row = self.db.execute(
            "SELECT pack FROM attempts WHERE block = ? ORDER BY id DESC LIMIT 1", (block,)
        ).fetchone()
        return None if row is None else str(row[0])

    def latest_conflict_pack(self) -> str | None:
        """The pack that recorded the latest conflict, or None (no conflict recorded)."""
        row = self.db.execute("SELECT pack FROM conflicts ORDER BY id DESC LIMIT 1").fetchone()
        return None if row is None else str(row[0])

    def attempts(self) -> list[dict[str, Any]]:
        """Every attempt with its warnings, oldest first."""
        return list(self.attempt_rows(warnings=True))

    def attempt_rows(self, warnings: bool = False) -> Iterator[dict[str, Any]]:
        """Every attempt, oldest first, read as the caller goes (memory stays constant);
        with ``warnings``, each with the list of its warnings' messages."""
        rows = self.db.cursor()
        rows.row_factory = None  # plain tuples: zipped with the names faster than dict(Row)
        rows.execute("SELECT * FROM attempts ORDER BY id")
        attempt = _AttemptTypes(self, [d[0] for d in rows.description])
        if not warnings:
            yield from map(attempt, rows)
            return
        found = self.db.execute(
            "SELECT attempt_id, message, id FROM warnings ORDER BY attempt_id, id"
        )  # read alongside the attempts: both in attempt order
        pending = next(found, None)
        for row in rows:
            record = attempt(row)
            messages = []
            while pending is not None and pending[0] <= record["id"]:
                if type(pending[0]) is not int or type(pending[1]) is not str:
                    raise LedgerError(
                        self._changed(
                            f"warnings row {pending[2]}: attempt_id or message is not "
                            "what this engine writes (an integer, text)"
                        )
                    )
                if pending[0] == record["id"]:
                    messages.append(pending[1])
                pending = next(found, None)
            record["warnings"] = messages
            yield record

    def gate_results(self) -> list[dict[str, Any]]:
        """Every recorded gate result, oldest first (``checked``/``errors`` as lists)."""
        out = []
        for row in self.db.execute("SELECT * FROM gate_results ORDER BY id"):
            record = dict(row)
            record["valid"] = bool(record["valid"])
            where = f"gate_results row {record['id']}"
            record["checked"] = self.decoded(record["checked"], where)
            record["errors"] = self.decoded(record["errors"], where)
            record["artifact"] = (
                self.decoded(record["artifact"], where) if record["artifact"] is not None else None
            )
            out.append(record)
        return out

    def round_counts(self, block: str, before: int | None = None) -> list[tuple[int, int, int]]:
        """(round, count, total) recorded for ``block``, oldest round first (only rounds
        before ``before`` when given)."""
        rows = self.db.execute(
            "SELECT round, count, total FROM round_counts WHERE block = ? "
            "AND (? IS NULL OR round < ?) ORDER BY round",
            (block, before, before),
        )
        return [(int(r["round"]), int(r["count"]), int(r["total"])) for r in rows]

    # ------------------------------------------------------------------ writes

    def put_round_count(
        self, db: sqlite3.Connection, block: str, round_number: int, count: int, total: int
    ) -> None:
        """Record (or replace) a round's count, inside a transaction the caller holds: a
        round evaluated again replaces its count, never adds to it."""
        db.execute(
            "INSERT OR REPLACE INTO round_counts (block, round, count, total, ts) "
            "VALUES (?, ?, ?, ?, ?)",
            (block, round_number, count, total, now()),
        )

    def record_gate(self, record: GateRecord) -> int:
        """Record one gate result."""
        values = dict(record.__dict__)
        values["valid"] = int(record.valid)
        values["checked"] = json.dumps(list(record.checked), ensure_ascii=False)
        values["errors"] = json.dumps(list(record.errors), ensure_ascii=False)
        values["artifact"] = (
            None if record.artifact is None else json.dumps(record.artifact, ensure_ascii=False)
        )
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        with self.transaction() as db:
            cursor = db.execute(
                f"INSERT INTO gate_results ({columns}) VALUES ({marks})", list(values.values())
            )
            return int(cursor.lastrowid or 0)

    def record(self, record: AttemptRecord, warnings: Sequence[str] = ()) -> int:
        with self.transaction() as db:
            return self.insert(db, record, warnings)

    def insert(
        self, db: sqlite3.Connection, record: AttemptRecord, warnings: Sequence[str] = ()
    ) -> int:
        """Insert inside a transaction the caller holds."""
        values = {k: v for k, v in record.__dict__.items()}
        values["ts"] = now()
        columns = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        cursor = db.execute(
            f"INSERT INTO attempts ({columns}) VALUES ({marks})", list(values.values())
        )
        attempt_id = int(cursor.lastrowid or 0)
        for message in warnings:
            db.execute(
                "INSERT INTO warnings (attempt_id, ts, message) VALUES (?, ?, ?)",
                (attempt_id, values["ts"], message),
            )
        return attempt_id


def keep_output(
    db: sqlite3.Connection,
    attempt_id: int,
    text: str,
    vars: Mapping[str, str],
    context: Mapping[str, Any],
) -> None:
    """Keep an attempt's output (zlib-compressed) and its vars and context, inside a
    transaction the caller holds."""
    db.execute(
        "INSERT INTO kept_outputs (attempt_id, vars, context, output) VALUES (?, ?, ?, ?)",
        (
            attempt_id,
            json.dumps(dict(vars), ensure_ascii=False),
            json.dumps(dict(context), ensure_ascii=False, default=str),
            zlib.compress(text.encode("utf-8", errors="surrogatepass")),
        ),
    )


_PYTHON_TYPES: dict[str, type] = {"integer": int, "text": str, "blob": bytes}
_TYPE_NAMES: dict[type, str] = {
    int: "an integer",
    str: "text",
    bytes: "bytes",
    float: "a real",
    type(None): "NULL",
}


class _AttemptTypes:
    """An attempts row as a dict, once its values are checked to be of the types this
    engine writes (a LedgerError naming the row otherwise). The types of a row (which
    columns are NULL) take few forms: each form is checked once, so a read stays as fast."""

    def __init__(self, ledger: Ledger, names: Sequence[str]) -> None:
        expected = {
            name: (storage, nullable) for name, storage, nullable in expected_schema()["attempts"]
        }
        self.ledger = ledger
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

    def __call__(self, row: tuple[Any, ...]) -> dict[str, Any]:
        kinds = tuple(map(type, row))
        if kinds not in self.good:
            for name, kind, allowed in zip(self.names, kinds, self.allowed, strict=True):
                if kind not in allowed:
                    what = " or ".join(sorted(_TYPE_NAMES[t] for t in allowed))
                    raise LedgerError(
                        self.ledger._changed(
                            f"attempts row {row[self.names.index('id')]}: column {name} holds "
                            f"{_TYPE_NAMES.get(kind, kind.__name__)}, not {what}"
                        )
                    )
            self.good.add(kinds)
        return _attempt(dict(zip(self.names, row, strict=True)))


def _attempt(record: dict[str, Any]) -> dict[str, Any]:
    record["final"] = bool(record["final"])
    if record["example_truncated"] is not None:
        record["example_truncated"] = bool(record["example_truncated"])
    return record


def kept_records(
    ledger: Ledger, after: int = 0, limit: int = -1, max_text_bytes: int = MAX_OUTPUT_BYTES
) -> Iterator[dict[str, Any]]:
    """Kept attempts with ids above ``after`` as ``--jsonl`` records, oldest first, each
    with the errors of its item's earlier attempts (``previous_errors``, oldest first).
    A kept output that does not decompress within ``max_text_bytes``, or whose vars or
    context are not JSON, gives ``{"id": ..., "damaged": why}`` instead (a ledger edited
    or damaged by hand)."""
    rows = ledger.db.execute(
        "SELECT a.id, a.block, a.nonce, a.attempt, k.vars, k.context, k.output,"
        " (SELECT json_group_array(error) FROM (SELECT p.error FROM attempts p"
        "   WHERE p.block = a.block AND p.item = a.item AND p.id < a.id"
        "   AND typeof(p.error) = 'text' ORDER BY p.id)) AS previous_errors,"
        " (SELECT min(p.id) FROM attempts p WHERE p.block = a.block AND p.item = a.item"
        "   AND p.id < a.id AND typeof(p.error) NOT IN ('text', 'null')) AS bad_error"
        " FROM kept_outputs k JOIN attempts a ON a.id = k.attempt_id"
        " WHERE a.id > ? ORDER BY a.id LIMIT ?",
        (after, limit),
    )
    for row in rows:
        bad = _bad_kept_row(row)
        if bad is not None:
            yield {"id": row["id"], "damaged": bad}
            continue
        try:
            record = {
                "id": row["id"],
                "block": row["block"],
                "nonce": row["nonce"],
                "vars": json.loads(row["vars"]),
                "context": json.loads(row["context"]),
                "attempt": row["attempt"],
                "previous_errors": json.loads(row["previous_errors"] or "[]"),
                "text": _kept_text(row["output"], max_text_bytes),
            }
        except RecursionError:
            record = {"id": row["id"], "damaged": "its vars or context are nested too deeply"}
        except (ValueError, TypeError, zlib.error) as exc:
            record = {"id": row["id"], "damaged": f"its kept output cannot be read ({exc})"}
        yield record


def _bad_kept_row(row: sqlite3.Row) -> str | None:
    """Why the attempt row of a kept output is not what this engine writes, or None."""
    if row["bad_error"] is not None:
        return f"the error of attempt {row['bad_error']} of its item is not text"
    for name, kind in (("block", str), ("nonce", (str, type(None))), ("attempt", int)):
        if not isinstance(row[name], kind):
            return f"column {name} of its attempt does not hold what this engine writes"
    return None


def _kept_text(compressed: bytes, max_text_bytes: int) -> str:
    """A kept output, decompressed no further than ``max_text_bytes`` (ValueError beyond:
    a few kilobytes of zlib data can hold gigabytes)."""
    inflate = zlib.decompressobj()
    data = inflate.decompress(compressed, max_text_bytes + 1)
    if len(data) > max_text_bytes:
        raise ValueError(f"longer than {max_text_bytes} bytes once decompressed")
    if not inflate.eof:
        raise ValueError("the zlib data is cut short")
    return data.decode("utf-8", errors="surrogatepass")


def accepted_rounds(session_dir: Path, block: str) -> frozenset[int] | None:
    """Rounds whose output for ``block`` the ledger in ``session_dir`` accepted (passed or
    warned); None when the folder has no ledger."""
    if not (session_dir / LEDGER_FILE).is_file():
        return None
    with Ledger.read_only(session_dir) as ledger:
        return frozenset(
            row["round"]
            for row in ledger.attempts()
            if row["block"] == block
            and row["round"] is not None
            and row["status"] in ("pass", "warn")
        )


PROMPT_COLUMNS = (
    "prompt_sha256",
    "modification",
    "example_tier",
    "example_source",
    "example_chars",
    "example_tokens",
    "example_original_chars",
    "example_truncated",
)


def note_prompt(ledger: Ledger, attempt_id: int, prompt: Mapping[str, Any]) -> None:
    """Record on an attempt the prompt its decision led to (keys of ``PROMPT_COLUMNS``)
    and the prompt's ``warnings``."""
    columns = [c for c in PROMPT_COLUMNS if c in prompt]
    assignments = ", ".join(f"{c} = ?" for c in columns)
    with ledger.transaction() as db:
        if columns:
            db.execute(
                f"UPDATE attempts SET {assignments} WHERE id = ?",
                [prompt[c] for c in columns] + [attempt_id],
            )
        for message in prompt.get("warnings") or ():
            db.execute(
                "INSERT INTO warnings (attempt_id, ts, message) VALUES (?, ?, ?)",
                (attempt_id, now(), message),
            )


def item_key(parts: Mapping[str, Any], *, name: str | None = None, run: str | None = None) -> str:
    """What makes repeated calls the same item: the values of the parts the pack's
    ``session.item`` names (by default the nonce and the params); an item a caller names
    (``name``: `--item`, ``item=``) is that name alone, whatever the parts; a ``run`` id
    (`rules run` without a nonce or a name) joins the parts, so the run is an item of its
    own."""
    if name is not None:
        return json.dumps({"item": name}, ensure_ascii=False)
    values = dict(parts) if run is None else {**parts, "run": run}
    return json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
