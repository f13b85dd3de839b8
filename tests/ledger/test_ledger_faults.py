"""Faults of a PostgreSQL ledger: a server that cannot be reached, a missing driver, a
statement over its timeout, a server restarted under running writers. Messages name the
ledger by its redacted URL only."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pg_server import PASSWORD, PostgresServer, missing_reason

from engine.ledger import LedgerError, redacted
from engine.ledger.attempts import Attempts
from engine.ledger.connection import PostgresLedger, Tx, open_ledger
from engine.ledger.url import parse_url
from engine.pack.inputs import OutputInput

WORKER = Path(__file__).with_name("ledger_worker.py")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again when the with ends


@pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))
def test_an_unreachable_server_is_a_quick_error_naming_the_redacted_url() -> None:
    url = f"postgresql://rules:{PASSWORD}@127.0.0.1:{closed_port()}/rules"
    started = time.monotonic()
    with pytest.raises(LedgerError) as caught:
        open_ledger(url)
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert message.startswith(f"postgresql://rules:***@127.0.0.1:{url.split(':')[-1]}: ")
    assert "cannot connect" in message and "refused" in message
    assert PASSWORD not in message


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an absent package does
    with pytest.raises(LedgerError, match=r"pip install 'rules-engine\[postgres\]'") as caught:
        open_ledger(f"postgresql://u:{PASSWORD}@127.0.0.1:5432/db")
    assert PASSWORD not in str(caught.value)


def test_a_wrong_password_is_refused_without_showing_it(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.url(password="wrong-pw-77")
    with pytest.raises(LedgerError) as caught:
        open_ledger(url)
    message = str(caught.value)
    assert message.startswith(redacted(url)) and "password authentication failed" in message
    assert "wrong-pw-77" not in message and PASSWORD not in message


def test_a_statement_over_its_timeout_fails_clearly_and_writes_nothing(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database()
    ledger = PostgresLedger(parse_url(url), statement_timeout_ms=200)
    try:

        def slow(tx: Tx) -> None:
            tx.execute("INSERT INTO settings (key, value) VALUES ('k', 'v')")
            tx.one("SELECT pg_sleep(5)")

        started = time.monotonic()
        with pytest.raises(LedgerError, match="statement timeout") as caught:
            ledger.write(slow)
        assert time.monotonic() - started < 3
        assert PASSWORD not in str(caught.value)
        assert ledger.read(lambda tx: tx.all("SELECT key FROM settings")) == []
    finally:
        ledger.close()


@pytest.mark.slow
def test_a_server_restart_under_writers_loses_and_duplicates_nothing(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database()
    open_ledger(url).close()
    writers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, "s", "1000", "3", str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    outputs = [writer.stdout for writer in writers if writer.stdout]
    lines = [[out.readline()] for out in outputs]
    postgres_server.restart()  # every writer is under way: each has recorded one attempt
    for writer, out, seen in zip(writers, outputs, lines, strict=True):
        seen.extend(out.read().splitlines())  # not communicate(): it skips what is buffered
        out.close()
        writer.wait(timeout=300)
    assert [w.returncode for w in writers] == [0, 0, 0, 0]
    errors = [line for seen in lines for line in seen if line.startswith("error: ")]
    assert errors == []  # each write the restart cut was retried on a fresh connection
    printed = [(item, int(number)) for seen in lines for item, number in map(str.split, seen)]
    assert len(printed) == 4000
    with open_ledger(url) as ledger:
        recorded = Attempts(ledger).numbers("s")
    assert sorted(printed) == sorted(
        (item, n) for (_, item), numbers in recorded.items() for n in numbers
    )
    for numbers in recorded.values():
        assert sorted(numbers) == list(range(1, len(numbers) + 1))


def _await_sync_rep(server: PostgresServer, admin: Any) -> None:
    """Return once a commit waits for a synchronous standby (the reload that names one
    reaches the server's processes a moment after it returns): a probe commit in the
    ``postgres`` database is seen waiting, then cancelled (it commits locally)."""
    import psycopg

    deadline = time.monotonic() + 30
    with psycopg.connect(server.url(), autocommit=True) as probe:
        probe.execute("SET synchronous_commit = on")
        while True:
            assert time.monotonic() < deadline, "synchronous replication never began"
            insert = threading.Thread(
                target=probe.execute, args=("INSERT INTO sync_probe VALUES (1)",)
            )
            insert.start()
            insert.join(timeout=0.5)
            if insert.is_alive():  # its commit waits: cancel the wait
                admin.execute("SELECT pg_cancel_backend(%s)", (probe.info.backend_pid,))
                insert.join(timeout=30)
                return


@pytest.mark.heavy
def test_an_evaluation_whose_connection_is_lost_after_commit_is_recorded_once(
    postgres_server: PostgresServer,
) -> None:
    """The connection of an evaluation is cut after its COMMIT is written but before the
    client hears of it: the retried transaction finds the committed attempt by its write
    token and returns it; the attempt is recorded once and the next one is number 2.

    The moment is made exact with synchronous replication to a standby that never comes:
    COMMIT then waits after committing locally, and terminating that backend cuts the
    connection there."""
    import psycopg

    import engine
    from engine.session.recording import Session

    url = postgres_server.create_database()
    dbname = url.rsplit("/", 1)[1]
    pack = engine.load_pack("builtin:sentinel")
    bad = Path("examples/sentinel/verdict_bad.txt")
    text = (Path(__file__).parents[2] / bad).read_text(encoding="utf-8")
    inputs: dict[str, Any] = {"nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
    with psycopg.connect(postgres_server.url(), autocommit=True) as admin:
        # this database's commits wait for a standby (the server's default is off)
        admin.execute(f"ALTER DATABASE {dbname} SET synchronous_commit = on")
        with Session(pack, "s", ledger=url) as session:
            outcomes: list[Any] = []
            failures: list[BaseException] = []

            def evaluate() -> None:
                try:
                    outcomes.append(session.evaluate(OutputInput("VERDICT", text, **inputs)))
                except BaseException as exc:  # the assertions below report it
                    failures.append(exc)

            worker = threading.Thread(target=evaluate)
            try:
                admin.execute("CREATE TABLE IF NOT EXISTS sync_probe (n int)")
                admin.execute("ALTER SYSTEM SET synchronous_standby_names = 'absent'")
                admin.execute("SELECT pg_reload_conf()")
                _await_sync_rep(postgres_server, admin)
                worker.start()
                deadline = time.monotonic() + 30
                waiting = None
                while waiting is None:
                    assert time.monotonic() < deadline, "the evaluation never reached COMMIT"
                    waiting = admin.execute(
                        "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                        " AND wait_event = 'SyncRep'",
                        (dbname,),
                    ).fetchone()
                    time.sleep(0.02)
                admin.execute("SELECT pg_terminate_backend(%s)", (waiting[0],))
            finally:
                admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
                admin.execute("SELECT pg_reload_conf()")
                if worker.ident is not None:
                    worker.join(timeout=60)
            assert failures == [] and len(outcomes) == 1
            first = outcomes[0]
            assert first.decision.action == "REPAIR" and first.decision.attempt == 1
            second = session.evaluate(OutputInput("VERDICT", text, **inputs))
            assert second.decision.attempt == 2 and second.decision.final
        with open_ledger(url) as ledger:
            rows = ledger.read(
                lambda tx: tx.all("SELECT id, attempt, token FROM attempts ORDER BY id")
            )
        assert [(row[0], row[1]) for row in rows] == [
            (first.attempt_id, 1),
            (second.attempt_id, 2),
        ]
        assert all(row[2] for row in rows)  # every attempt the session records has a token
