"""The schema on both backends: created at the engine's version, an older ledger migrated,
a newer one refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from legacy_ledger import expected, kept_rows, write_legacy
from pg_server import PASSWORD

from engine.ledger import LedgerError, redacted
from engine.ledger import schema as ledger_schema
from engine.ledger.attempts import Attempt, Attempts, ItemAttempt, insert_attempt
from engine.ledger.connection import Tx, open_ledger

TABLES = {
    "ledger_schema",
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
    "item_counters",
    "failed_gates",
    "shadow_evaluations",
    "reviews",
    "budget_counters",
    "budget_spend",
    "breaker_states",
    "breaker_outcomes",
}

ATTEMPT = Attempt(
    pack="p",
    status="fail",
    action="retry",
    reason="r",
    rule="x",
    final=False,
    output_sha256="0" * 64,
    output_chars=3,
)


def tables(tx: Tx) -> set[str]:
    if tx.dialect == "sqlite":
        rows = tx.all("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        rows = tx.all(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
    return {str(r[0]) for r in rows} - {"sqlite_sequence"}


def test_a_new_ledger_has_every_table_at_the_engines_version(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        assert ledger.version() == ledger_schema.VERSION
        assert ledger.read(tables) == TABLES
    with open_ledger(ledger_url) as again:  # opening an up-to-date ledger changes nothing
        assert again.version() == ledger_schema.VERSION


def test_an_older_ledger_is_migrated_keeping_its_rows(ledger_url: str) -> None:
    with open_ledger(ledger_url, upto=1) as old:
        assert old.version() == 1
        assert "item_counters" not in old.read(tables)
        # two attempts recorded by an engine of schema 1 (no counters, no tokens yet)
        for number in (1, 2):
            old.write(
                lambda tx, n=number: tx.execute(
                    "INSERT INTO attempts (session, ts, pack, block, item, attempt, status,"
                    " action, reason, rule, final, output_sha256, output_chars)"
                    " VALUES ('s', 't', 'p', 'B', 'i', ?, 'fail', 'retry', 'r', 'x', 0, 'h', 1)",
                    (n,),
                )
            )
    with open_ledger(ledger_url) as ledger:
        assert ledger.version() == ledger_schema.VERSION
        assert ledger.read(tables) == TABLES
        attempts = Attempts(ledger)
        # numbering goes on after the attempts the older engine recorded
        assert attempts.record_attempt(ItemAttempt("s", "B", "i", ATTEMPT)) == 3
        assert [r["attempt"] for r in attempts.history("s", "B", "i")] == [1, 2, 3]


def test_a_ledger_of_a_newer_engine_is_refused(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        ledger.write(lambda tx: tx.execute(ledger_schema.version_statement(99)))
    with pytest.raises(LedgerError) as caught:
        open_ledger(ledger_url)
    message = str(caught.value)
    assert f"newer engine (schema 99, this engine knows {ledger_schema.VERSION})" in message
    assert message.startswith(redacted(ledger_url))
    assert PASSWORD not in message


def test_a_failed_migration_leaves_the_ledger_as_it_was(ledger_url: str) -> None:
    with open_ledger(ledger_url, upto=1) as old:
        # a table in the way of migration 2: the migration fails as a whole
        old.write(lambda tx: tx.execute("CREATE TABLE failed_gates (x INTEGER)"))
    with pytest.raises(LedgerError):
        open_ledger(ledger_url)
    with open_ledger(ledger_url, upto=1) as old:
        assert old.version() == 1
        assert "item_counters" not in old.read(tables)


def test_every_migration_is_single_statements() -> None:
    for number in range(1, ledger_schema.VERSION + 1):
        for dialect in ("sqlite", "postgresql"):
            for statement in ledger_schema.statements(dialect, number):
                assert ";" not in statement and "{" not in statement


def test_sessions_of_one_ledger_count_apart(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        attempts = Attempts(ledger)
        assert [attempts.record_attempt(ItemAttempt("a", "B", "i", ATTEMPT)) for _ in range(2)] == [
            1,
            2,
        ]
        assert attempts.record_attempt(ItemAttempt("b", "B", "i", ATTEMPT)) == 1
        assert attempts.record_attempt(ItemAttempt("a", "C", "i", ATTEMPT)) == 1
        assert (
            ledger.write(lambda tx: insert_attempt(tx, ItemAttempt("a", "B", "j", ATTEMPT), 1)) > 0
        )
        assert attempts.numbers("a") == {("B", "i"): [1, 2], ("C", "i"): [1], ("B", "j"): [1]}


def test_a_session_folder_ledger_of_the_earlier_format_is_converted(tmp_path: Path) -> None:
    path = tmp_path / "session" / "ledger.sqlite3"
    written = write_legacy(path)
    with open_ledger(path) as ledger:
        assert ledger.version() == ledger_schema.VERSION
        assert ledger.read(tables) == TABLES
        assert (
            Attempts(ledger).record_attempt(ItemAttempt("", "VERDICT", '{"i": 1}', ATTEMPT)) == 1
        )  # its run ended (PROCEED): the next starts run 2
    assert kept_rows(path, written) == {
        **expected(written),
        "attempts": [*expected(written)["attempts"], kept_rows(path, written)["attempts"][2]],
    }
