"""Session-folder ledgers of the earlier format, converted into the ledger's schema.

An engine before the shared ledger kept a session folder's ledger in its own schema: the
version in ``PRAGMA user_version`` (1..7), tables without a ``session`` column, no
``ledger_schema`` table. ``MIGRATIONS`` are that format's statements, kept only as data: to
bring an old file to its last version (7) before converting it, and for tests that write
such files. ``convert`` turns such a ledger into the current schema in the transaction
that opens it, every row kept (as session ``''``, the session of a folder), ids included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.ledger.errors import LedgerError
from engine.ledger.url import LedgerUrl

if TYPE_CHECKING:
    from engine.ledger.tx import Tx

MIGRATIONS: list[list[str]] = [
    # 1: attempts with their decision, and warnings
    [
        (
            "CREATE TABLE attempts ( id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT NULL, "
            "pack TEXT NOT NULL, block TEXT NOT NULL, item TEXT NOT NULL, round INTEGER, "
            "attempt INTEGER NOT NULL, status TEXT NOT NULL, failure_type TEXT, error TEXT, "
            "action TEXT NOT NULL, reason TEXT NOT NULL, rule TEXT NOT NULL, final INTEGER "
            "NOT NULL, nonce TEXT, model TEXT, output_sha256 TEXT NOT NULL, output_chars "
            "INTEGER NOT NULL, prompt_sha256 TEXT, example_tier TEXT, example_chars INTEGER, "
            "example_truncated INTEGER )"
        ),
        "CREATE INDEX attempts_item ON attempts (block, item, id)",
        (
            "CREATE TABLE warnings ( id INTEGER PRIMARY KEY AUTOINCREMENT, attempt_id INTEGER"
            " NOT NULL REFERENCES attempts (id), ts TEXT NOT NULL, message TEXT NOT NULL )"
        ),
    ],
    # 2: which validation tier failed, and what went into the next prompt
    [
        "ALTER TABLE attempts ADD COLUMN validation TEXT",
        "ALTER TABLE attempts ADD COLUMN data_summary TEXT",
        "ALTER TABLE attempts ADD COLUMN modification TEXT",
        "ALTER TABLE attempts ADD COLUMN example_source TEXT",
        "ALTER TABLE attempts ADD COLUMN example_tokens INTEGER",
        "ALTER TABLE attempts ADD COLUMN example_original_chars INTEGER",
    ],
    # 3: results of quality gates
    [
        (
            "CREATE TABLE gate_results ( id INTEGER PRIMARY KEY AUTOINCREMENT, ts TEXT NOT "
            "NULL, pack TEXT NOT NULL, gate TEXT NOT NULL, retry INTEGER NOT NULL, valid "
            "INTEGER NOT NULL, action TEXT NOT NULL, reason TEXT NOT NULL, checked TEXT NOT "
            "NULL, errors TEXT NOT NULL, reprompt_sha256 TEXT, artifact TEXT )"
        ),
        "CREATE INDEX gate_results_gate ON gate_results (gate, id)",
    ],
    # 4: per-round counts of a block's rate limits
    [
        (
            "CREATE TABLE round_counts ( block TEXT NOT NULL, round INTEGER NOT NULL, count "
            "INTEGER NOT NULL, total INTEGER NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (block, "
            "round) )"
        ),
    ],
    # 5: conflicts and their resolutions
    [
        (
            "CREATE TABLE conflicts ( id INTEGER PRIMARY KEY AUTOINCREMENT, ref TEXT NOT NULL"
            " UNIQUE, pack TEXT NOT NULL, block TEXT NOT NULL, type TEXT NOT NULL, converted "
            "INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL, severity TEXT NOT NULL, round "
            "INTEGER, number INTEGER NOT NULL, fields TEXT NOT NULL, options TEXT NOT NULL, "
            "proposal TEXT, created TEXT NOT NULL, updated TEXT NOT NULL )"
        ),
        (
            "CREATE TABLE resolutions ( id INTEGER PRIMARY KEY AUTOINCREMENT, conflict_id "
            "INTEGER NOT NULL REFERENCES conflicts(id), option TEXT NOT NULL, decision TEXT "
            "NOT NULL, rationale TEXT NOT NULL, constraints TEXT NOT NULL, actions TEXT NOT "
            "NULL, decided_by TEXT NOT NULL, decided_at TEXT NOT NULL )"
        ),
    ],
    # 6: kept outputs and session settings
    [
        (
            "CREATE TABLE kept_outputs ( attempt_id INTEGER PRIMARY KEY REFERENCES attempts "
            "(id), vars TEXT NOT NULL, context TEXT NOT NULL, output BLOB NOT NULL )"
        ),
        "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    # 7: the user's choices and round statuses
    [
        (
            "CREATE TABLE choices ( id INTEGER PRIMARY KEY AUTOINCREMENT, attempt_id INTEGER "
            "NOT NULL REFERENCES attempts (id), ts TEXT NOT NULL, block TEXT NOT NULL, item "
            "TEXT NOT NULL, round INTEGER, option TEXT NOT NULL, label TEXT NOT NULL, effect "
            "TEXT NOT NULL, text TEXT )"
        ),
        (
            "CREATE TABLE round_status ( block TEXT NOT NULL, round INTEGER NOT NULL, status "
            "TEXT NOT NULL, ts TEXT NOT NULL, PRIMARY KEY (block, round) )"
        ),
    ],
]

VERSION = len(MIGRATIONS)

TABLES = (
    "attempts",
    "warnings",
    "gate_results",
    "round_counts",
    "conflicts",
    "resolutions",
    "kept_outputs",
    "settings",
    "choices",
    "round_status",
)
"""The earlier format's tables, parents before the tables that refer to them."""

INDEXES = ("attempts_item", "gate_results_gate")

FAILED_GATES = (
    "INSERT INTO failed_gates (session, ts, gate, gate_result, reprompt_generated)"
    " SELECT session, ts, gate, json_object('gate', gate,"
    " 'valid', json(CASE valid WHEN 0 THEN 'false' ELSE 'true' END),"
    " 'checked', json(checked), 'errors', json(errors), 'action', action, 'retry', retry),"
    " reprompt_sha256 IS NOT NULL FROM gate_results WHERE action != 'PROCEED' ORDER BY id"
)
"""The failure log's lines of an earlier-format ledger's gate results: each result in the
engine's own names (``gate``, not a pack's), for the pack's log view to show."""


def convert(
    tx: Tx, url: LedgerUrl, upto: int, migrate: Callable[[Tx, LedgerUrl, int], None]
) -> None:
    """Convert the earlier-format ledger open in ``tx`` into schema ``upto`` (``migrate``
    creates it), keeping every row: the old tables are renamed, the new schema created at
    version 1, the rows copied (session ``''``), then the later migrations applied (the
    attempt counters are filled from the attempts) and the old tables dropped."""
    row = tx.one("PRAGMA user_version")
    old = int(row[0]) if row else 0
    if old > VERSION:
        raise LedgerError(
            f"{url}: written by a newer engine (schema {old}, this engine knows {VERSION} "
            "of the session-folder format); upgrade the engine to use this ledger"
        )
    for number in range(old, VERSION):  # bring it to the last version of its format
        for statement in MIGRATIONS[number]:
            tx.execute(statement)
    for name in INDEXES:
        tx.execute(f"DROP INDEX IF EXISTS {name}")
    for table in TABLES:
        tx.execute(f"ALTER TABLE {table} RENAME TO legacy_{table}")
    migrate(tx, url, 1)
    for table in TABLES:
        old_columns = [r[1] for r in tx.all(f"PRAGMA table_info(legacy_{table})")]
        new_columns = {r[1] for r in tx.all(f"PRAGMA table_info({table})")}
        columns = ", ".join(c for c in old_columns if c in new_columns)
        tx.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM legacy_{table}")
    for table in reversed(TABLES):
        tx.execute(f"DROP TABLE legacy_{table}")
    tx.execute("PRAGMA user_version = 0")
    migrate(tx, url, upto)
    # the gate failure log of the gate runs recorded before it was a table, as its lines
    tx.execute(FAILED_GATES)
