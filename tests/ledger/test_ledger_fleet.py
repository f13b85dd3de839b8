"""A fleet on one PostgreSQL ledger: 16 writer processes × 500 attempts over 20 shared
items, 3 writers killed with SIGKILL and the server restarted during the run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pg_server import PostgresServer

from engine.ledger.attempts import Attempts
from engine.ledger.connection import open_ledger

WORKER = Path(__file__).with_name("ledger_worker.py")
WRITERS, RECORDS, ITEMS, KILLED = 16, 500, 20, 3


@pytest.mark.slow
def test_a_fleet_with_kills_and_a_restart_numbers_every_item_exactly(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database()
    open_ledger(url).close()
    writers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, "s", str(RECORDS), str(ITEMS), str(n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(WRITERS)
    ]
    outputs = [writer.stdout for writer in writers if writer.stdout]
    lines = [[out.readline()] for out in outputs]  # every writer is under way
    time.sleep(0.5)
    for writer in writers[:KILLED]:
        os.kill(writer.pid, signal.SIGKILL)  # mid-run: maybe mid-transaction
    postgres_server.restart()
    for writer, out, seen in zip(writers, outputs, lines, strict=True):
        seen.extend(out.read().splitlines())  # not communicate(): it skips what is buffered
        out.close()
        writer.wait(timeout=600)
    assert [w.returncode for w in writers[KILLED:]] == [0] * (WRITERS - KILLED)
    assert not [line for seen in lines for line in seen if line.startswith("error")]
    for seen in lines[KILLED:]:
        assert len(seen) == RECORDS
    printed = Counter(
        (item, int(number)) for seen in lines for item, number in map(str.split, seen)
    )
    assert max(printed.values()) == 1  # no number given twice
    with open_ledger(url) as ledger:
        recorded = Attempts(ledger).numbers("s")
        warnings = ledger.read(
            lambda tx: tx.all(
                "SELECT count(w.id) FROM attempts a LEFT JOIN warnings w"
                " ON w.attempt_id = a.id GROUP BY a.id"
            )
        )
    numbered = Counter((item, n) for (_, item), numbers in recorded.items() for n in numbers)
    assert max(numbered.values()) == 1
    for numbers in recorded.values():  # 1..k, no gap
        assert sorted(numbers) == list(range(1, len(numbers) + 1))
    assert set(printed) <= set(numbered)  # no row a writer was told of is lost
    # a killed writer may have committed its last attempt without printing it
    assert len(numbered) - len(printed) <= KILLED
    assert {count for (count,) in warnings} <= {0, 2}  # nothing half-written
