"""Opening a ledger and running transactions on it, on SQLite or PostgreSQL.

SQLite: one connection to a file in WAL mode with a busy timeout; opening (create, migrate)
is serialised across processes by an advisory lock on ``ledger.lock`` beside the file, as
the session-folder ledger does; writers take the write lock up front (``BEGIN IMMEDIATE``).

PostgreSQL: psycopg 3 (the optional extra ``rules-engine[postgres]``) with a connection
pool; every connection has a connect timeout and a ``statement_timeout``. A transaction
that loses its connection (a server restart) runs once more on a fresh connection, within
``RETRY_WITHIN_S`` seconds; a second failure is a ``LedgerError``. The work of a
transaction is a function, so it can run again; ``Tx.retry`` tells it that it does (a
write that may have committed before its connection was lost checks for itself first).

SQL is written once with ``?`` parameters; ``Tx`` turns them into psycopg's ``%s``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from engine.core import deadline
from engine.ledger import (
    legacy,
    schema,
    sqlite_errors,
)
from engine.ledger.errors import LedgerError, LedgerTimeout
from engine.ledger.lock import BUSY_TIMEOUT_MS, opening_lock
from engine.ledger.tx import Row as Row  # re-exported: the repositories' row type
from engine.ledger.tx import Tx as Tx  # re-exported: the repositories' transaction
from engine.ledger.url import LedgerUrl, parse_url

APPLICATION_ID = 0x52554C45  # "RULE", as the session-folder ledger
LOCK_FILE = "ledger.lock"
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT_MS = 60_000
RETRY_WITHIN_S = 30.0
POOL_SIZE = 4
MIGRATION_LOCK = 0x52554C45  # pg_advisory_xact_lock key serialising migrations
WRITE_ADVICE = "writing a ledger needs write access to {folder}"

T = TypeVar("T")


def write_timed_out(ledger: object) -> LedgerTimeout:
    """The error of a write whose caller's deadline passed first (``ledger``: its path or
    redacted URL): rolled back, nothing written."""
    return LedgerTimeout(
        f"{ledger}: the request's time limit passed before the write committed; nothing was written"
    )


class Ledger:
    """An open ledger. ``write`` and ``read`` run a function in a transaction."""

    url: LedgerUrl
    dialect: schema.Dialect

    def write(self, work: Callable[[Tx], T], single: bool = False) -> T:
        """Run ``work`` in a write transaction. ``single``: ``work`` runs one statement,
        which may then be a transaction of its own (fewer round trips to a server)."""
        raise NotImplementedError

    def read(self, work: Callable[[Tx], T]) -> T:
        raise NotImplementedError

    def snapshot(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` reading one snapshot of the whole ledger: every statement sees the
        same committed rows, whatever other writers commit meanwhile (a copy of a ledger
        being written to: an item's counter and its attempts, warnings and the attempts
        they belong to, agree)."""
        return self.read(work)

    def version(self) -> int:
        """The schema version recorded in the ledger."""
        row = self.read(lambda tx: tx.one("SELECT version FROM ledger_schema"))
        return int(row[0]) if row else 0

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_ledger(
    location: str | Path | LedgerUrl,
    upto: int = schema.VERSION,
    *,
    read_only: bool = False,
    advice: str = WRITE_ADVICE,
) -> Ledger:
    """The ledger at ``location``, created or migrated to schema ``upto`` (the engine's own
    version; a lower one only in tests of migrations). A LedgerError when it cannot be
    reached, is no ledger, or was written by a newer engine. ``read_only`` (SQLite): open an
    existing file for reading only (nothing created, migrated or locked, unless it needs
    migrating and its folder is writable); ``advice`` ends the message when the lock file
    cannot be opened."""
    url = location if isinstance(location, LedgerUrl) else parse_url(location)
    if url.backend == "sqlite":
        if read_only:
            return SQLiteLedger.reader(url)
        return SQLiteLedger(url, upto, advice)
    return PostgresLedger(url, upto)


def migrate(tx: Tx, url: LedgerUrl, upto: int) -> None:
    """Bring the schema to version ``upto`` inside ``tx`` (all or nothing); refuse a ledger
    of a newer version than this engine's."""
    has_table = (
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ledger_schema'"
        if tx.dialect == "sqlite"
        else "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema()"
        " AND table_name = 'ledger_schema'"
    )
    found = tx.one(has_table)
    version = 0
    if found is not None:
        row = tx.one("SELECT version FROM ledger_schema")
        version = int(row[0]) if row else 0
    if version > schema.VERSION:
        raise LedgerError(
            f"{url}: written by a newer engine (schema {version}, this engine knows "
            f"{schema.VERSION}); upgrade the engine to use this ledger"
        )
    for number in range(version + 1, upto + 1):
        for statement in schema.statements(tx.dialect, number):
            tx.execute(statement)
        tx.execute(schema.version_statement(number))


# ---------------------------------------------------------------------------------- SQLite


class SQLiteLedger(Ledger):
    dialect: schema.Dialect = "sqlite"

    def __init__(
        self, url: LedgerUrl, upto: int = schema.VERSION, advice: str = WRITE_ADVICE
    ) -> None:
        assert url.path is not None
        self.url, self.path = url, url.path
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"{self.path.parent}: cannot create the ledger's folder: {exc.strerror or exc}"
            ) from None
        with opening_lock(self.path.parent / LOCK_FILE, advice):
            try:
                self.db = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
                )
                self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._open(upto)
            except sqlite3.DatabaseError as exc:
                self.db.close()
                raise LedgerError(
                    sqlite_errors.cause(exc, self.path)
                    or f"{self.path}: not a usable ledger ({exc}); it was left as it is: "
                    "move it away or choose another ledger"
                ) from None
            except BaseException:
                self.db.close()
                raise

    @classmethod
    def reader(cls, url: LedgerUrl) -> SQLiteLedger:
        """An existing ledger opened for reading only (SQLite ``mode=ro``): nothing is
        created, migrated or locked, so a ledger on read-only media can be read. A ledger
        that needs migrating is migrated first when its folder is writable."""
        assert url.path is not None
        path = url.path
        if not path.is_file():
            raise LedgerError(f"{path}: no ledger here")
        uri = path.resolve().as_uri()
        failure: sqlite3.DatabaseError | None = None
        # immutable=1 reads a WAL ledger whose folder cannot hold the -shm index
        for query in ("?mode=ro", "?mode=ro&immutable=1"):
            try:
                db = sqlite3.connect(uri + query, uri=True, isolation_level=None)
                app_id = db.execute("PRAGMA application_id").fetchone()[0]
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
                version = 0
                if "ledger_schema" in tables:
                    row = db.execute("SELECT version FROM ledger_schema").fetchone()
                    version = int(row[0]) if row else 0
            except sqlite3.DatabaseError as exc:
                failure = exc
                continue
            if app_id != APPLICATION_ID:
                db.close()
                raise LedgerError(f"{path}: this SQLite file is not a rules ledger")
            if version == schema.VERSION:
                ledger = cls.__new__(cls)
                ledger.url, ledger.path, ledger.db = url, path, db
                return ledger
            db.close()
            if version < schema.VERSION and os.access(path.parent, os.W_OK):
                return cls(url)  # an older schema: a writer upgrades it
            raise LedgerError(
                f"{path}: schema {version}, this engine reads {schema.VERSION}; "
                + (
                    "a newer ledger needs a newer engine"
                    if version > schema.VERSION
                    else "upgrading it needs write access to the folder (any writer, "
                    "e.g. `rules eval --session`, upgrades it)"
                )
            )
        raise LedgerError(
            f"{path}: cannot be read ({failure}); reading needs only read access, "
            "so the file is damaged or not a ledger"
        )

    def _open(self, upto: int) -> None:
        app_id = self.db.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master")}
        if (tables or app_id) and app_id != APPLICATION_ID:
            raise LedgerError(
                f"{self.path}: this SQLite file is not a rules ledger; it was left as it is: "
                "choose another ledger"
            )
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable enough, much faster
        self.db.execute("PRAGMA foreign_keys = ON")
        legacy_tables = bool(tables) and "ledger_schema" not in tables

        def setup(tx: Tx) -> None:
            if legacy_tables:  # a session-folder ledger of the earlier format
                legacy.convert(tx, self.url, upto, migrate)
            else:
                migrate(tx, self.url, upto)
            tx.execute(f"PRAGMA application_id = {APPLICATION_ID}")

        self.write(setup)

    def error(self, exc: sqlite3.Error) -> LedgerError:
        """What a SQLite error says about this ledger: its disk full or failing, another
        process holding it (``sqlite_errors``), a damaged file, or tables changed outside
        this engine."""
        if found := sqlite_errors.cause(exc, self.path):
            return LedgerError(found)
        if type(exc) is sqlite3.DatabaseError:
            return LedgerError(
                f"{self.path}: cannot be read ({exc}); the file is damaged: "
                f"`sqlite3 {self.path} .recover` can save what is left"
            )
        return LedgerError(changed(self.path, exc))

    def _run(self, begin: str, work: Callable[[Tx], T]) -> T:
        left = deadline.remaining()
        if left is not None:  # a caller's deadline: wait for a lock no longer than it
            if left <= 0:
                raise self.timeout()
            self.db.execute(
                f"PRAGMA busy_timeout = {max(1, min(BUSY_TIMEOUT_MS, int(left * 1000)))}"
            )
        try:
            self.db.execute(begin)
        except sqlite3.Error as exc:
            if left is not None and (deadline.remaining() or 0) <= 0:
                raise self.timeout() from None
            raise self.error(exc) from None
        try:
            result = work(Tx(self.db.cursor(), "sqlite"))
            if left is not None and (deadline.remaining() or 0) <= 0:
                raise self.timeout()  # rolled back below: past the deadline nothing commits
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):  # the failure below says what happened
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise self.error(exc) from None
            raise
        try:
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            with contextlib.suppress(sqlite3.Error):  # the failure below says what happened
                self.db.execute("ROLLBACK")
            raise LedgerError(
                sqlite_errors.cause(exc, self.path) or f"{self.path}: {exc}; nothing was written"
            ) from None
        return result

    def timeout(self) -> LedgerTimeout:
        return write_timed_out(self.path)

    def write(self, work: Callable[[Tx], T], single: bool = False) -> T:
        """Run ``work`` holding the write lock from the start (no lost update)."""
        return self._run("BEGIN IMMEDIATE", work)

    def read(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` on one consistent snapshot (a WAL read transaction keeps the
        snapshot its first statement takes until it ends)."""
        return self._run("BEGIN", work)

    def close(self) -> None:
        self.db.close()


def _flushed(work: Callable[[Tx], T], tx: Tx) -> T:
    """``work(tx)``, then what it left for later (``Tx.later``) run before the commit."""
    result = work(tx)
    tx.flush()
    return result


def changed(where: object, problem: object) -> str:
    """The message of a ledger whose tables or rows were changed outside this engine."""
    return (
        f"{where}: not a usable ledger ({problem}); it was changed outside this "
        "engine: undo that change, or move the ledger away and start a new session"
    )


# ------------------------------------------------------------------------------ PostgreSQL

# SQLSTATE classes of a connection lost or refused: 08 (connection exception), 57P01..03
# (the server shutting down, crashed, or not yet accepting connections).
_LOST = ("08", "57P01", "57P02", "57P03")
INSUFFICIENT_PRIVILEGE = "42501"


def _psycopg() -> tuple[Any, Any]:
    """psycopg and psycopg_pool, imported only when a PostgreSQL ledger is opened: the
    optional extra, and never loaded by SQLite users or at start-up."""
    try:
        return importlib.import_module("psycopg"), importlib.import_module("psycopg_pool")
    except ImportError:
        raise LedgerError(
            "a PostgreSQL ledger needs psycopg 3 and psycopg-pool: "
            "pip install 'rules-engine[postgres]'"
        ) from None


class PostgresLedger(Ledger):
    dialect: schema.Dialect = "postgresql"

    def __init__(
        self,
        url: LedgerUrl,
        upto: int = schema.VERSION,
        connect_timeout: float = CONNECT_TIMEOUT_S,
        statement_timeout_ms: int = STATEMENT_TIMEOUT_MS,
        retry_within: float = RETRY_WITHIN_S,
        pool_size: int = POOL_SIZE,
    ) -> None:
        self.url = url
        self.retry_within = retry_within
        try:
            self.psycopg, self.pool_module = _psycopg()
        except LedgerError as exc:
            raise LedgerError(f"{url}: {exc}") from None
        # the pool reports each failed reconnection as a warning; without a logging set-up
        # of the application Python would print them all to stderr: the ledger's own
        # LedgerError says what failed
        pool_log = logging.getLogger("psycopg.pool")
        if not any(isinstance(h, logging.NullHandler) for h in pool_log.handlers):
            pool_log.addHandler(logging.NullHandler())
        self.kwargs = {
            "connect_timeout": max(1, round(connect_timeout)),
            "options": f"-c statement_timeout={int(statement_timeout_ms)}",
            "autocommit": True,  # transactions are explicit (conn.transaction())
        }
        try:  # the URL's parts, never the URL: see LedgerUrl.connection_parameters
            self.conninfo = self.psycopg.conninfo.make_conninfo(**url.connection_parameters())
        except self.psycopg.Error as exc:
            raise self._error(exc, "cannot connect") from None
        first = self._connect()
        try:
            with first.transaction(), first.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                migrate(Tx(cursor, "postgresql"), url, upto)
        except self.psycopg.Error as exc:
            raise self._error(exc, "cannot set up the ledger") from None
        finally:
            first.close()
        self.pool = self.pool_module.ConnectionPool(
            self.conninfo,
            kwargs=self.kwargs,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=retry_within,
            name="rules-ledger",
        )
        self.pool.open(wait=False)

    def _connect(self) -> Any:
        try:
            return self.psycopg.connect(self.conninfo, **self.kwargs)
        except self.psycopg.Error as exc:
            raise self._error(exc, "cannot connect") from None

    def _error(self, exc: BaseException, what: str) -> LedgerError:
        message = " ".join(str(exc).split())
        if getattr(exc, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
            message += (
                " (this database user may not write there: reading a session, e.g. `rules log`, "
                "`rules report`, `rules export`, needs SELECT only; recording needs INSERT, "
                "UPDATE and DELETE on the ledger's tables)"
            )
        return LedgerError(f"{self.url}: {what}: {self.url.scrub(message)}")

    def _lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the connection was lost (or none could be had in time)."""
        if isinstance(exc, self.pool_module.PoolTimeout):
            return True
        if not isinstance(exc, self.psycopg.OperationalError):
            return False
        state = getattr(exc, "sqlstate", None)
        return state is None or state.startswith(_LOST)

    @contextmanager
    def _connection(self, fresh: bool, deadline: float) -> Iterator[Any]:
        """A pooled connection; with ``fresh``, one checked to work first (after a server
        restart the pool may still hold connections the restart broke)."""
        while True:
            conn = self.pool.getconn(timeout=max(0.1, deadline - time.monotonic()))
            if fresh:
                try:
                    conn.execute("SELECT 1")
                except self.psycopg.Error:
                    self.pool.putconn(conn)  # broken: the pool replaces it
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.05)
                    continue
            try:
                yield conn
            finally:
                self.pool.putconn(conn)
            return

    def _run(self, work: Callable[[Tx], T], retry: bool, until: float, single: bool) -> T:
        bounded = deadline.remaining() is not None
        if single and not retry and not bounded:  # autocommit makes it its transaction
            with self._connection(False, until) as conn, conn.cursor() as cursor:
                return _flushed(work, Tx(cursor, "postgresql", retry))
        with (
            self._connection(retry, until) as conn,
            conn.transaction(),
            conn.cursor() as cursor,
        ):
            if not bounded:
                return _flushed(work, Tx(cursor, "postgresql", retry))
            # a caller's deadline: no statement runs past it, and the transaction commits
            # before it or rolls back (an answered error records nothing)
            left = until - time.monotonic()
            if left <= 0:
                raise self.timeout()
            cursor.execute(f"SET LOCAL statement_timeout = {max(1, int(left * 1000))}")
            result = _flushed(work, Tx(cursor, "postgresql", retry))
            if time.monotonic() >= until:
                raise self.timeout()
            return result

    def timeout(self) -> LedgerTimeout:
        return write_timed_out(self.url)

    def write(self, work: Callable[[Tx], T], single: bool = False) -> T:
        """Run ``work`` in a transaction; once more on a fresh connection when the first
        run lost its connection (within ``retry_within`` seconds), else a LedgerError.
        Nothing of a failed run is written. Under a caller's deadline
        (``engine.core.deadline``) every wait and statement ends by it, and a transaction
        not committed by then is rolled back (a ``LedgerTimeout``)."""
        until = time.monotonic() + self.retry_within
        left = deadline.remaining()
        if left is not None:
            if left <= 0:
                raise self.timeout()
            until = min(until, time.monotonic() + left)
        failures = (self.psycopg.Error, self.pool_module.PoolTimeout)
        try:
            return self._run(work, False, until, single)
        except failures as exc:
            if left is not None and time.monotonic() >= until:
                raise self.timeout() from None
            if not self._lost(exc):
                raise self._error(exc, "a statement failed; nothing of it was written") from None
            first = " ".join(str(exc).split())
        self.pool.check()  # drop the other connections the restart broke
        try:
            return self._run(work, True, until, single)
        except failures as exc:
            if left is not None and time.monotonic() >= until:
                raise self.timeout() from None
            raise self._error(
                exc,
                f"the connection was lost ({self.url.scrub(first)}) and the retry within "
                f"{self.retry_within:g} s failed too; nothing of it was written",
            ) from None

    def read(self, work: Callable[[Tx], T]) -> T:
        return self.write(work)

    def snapshot(self, work: Callable[[Tx], T]) -> T:
        """``work`` in one REPEATABLE READ, READ ONLY transaction: PostgreSQL's default
        (READ COMMITTED) gives each statement a snapshot of its own."""

        def whole(tx: Tx) -> T:
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return work(tx)

        return self.write(whole)

    def close(self) -> None:
        self.pool.close()
