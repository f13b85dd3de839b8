"""Faults of a PostgreSQL ledger: a server that cannot be reached, a missing driver, a
statement over its timeout, a server restarted under running writers. Messages name the
ledger by its redacted URL only."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pg_server import PASSWORD, PostgresServer, missing_reason

from engine.ledger import LedgerError, redacted
from engine.ledger.attempts import Attempts
from engine.ledger.connection import PostgresLedger, Tx, open_ledger
from engine.ledger.url import parse_url

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
