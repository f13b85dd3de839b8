"""A fleet on one PostgreSQL ledger: 16 worker processes × 500 evaluations over 20 shared
items (each worker evaluates outputs with a shipped pack, decides with the item's history
read in the transaction that numbers the attempt, and records it), 3 workers killed with
SIGKILL and the server restarted during the run. Every item run is numbered 1..k and ends
in exactly one final decision; no acknowledged row is lost."""

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

from engine.ledger.connection import open_ledger

WORKER = Path(__file__).with_name("ledger_worker.py")
WORKERS, EVALUATIONS, ITEMS, KILLED = 16, 500, 20, 3
WITHIN_S = 150  # the whole run, start to end: well within 3 minutes


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def wait_until(condition: object, deadline: float, what: str) -> None:
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WITHIN_S} s: {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_a_fleet_of_evaluating_workers_with_kills_and_a_restart_numbers_every_run(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    deadline = time.monotonic() + WITHIN_S
    url = postgres_server.create_database()
    open_ledger(url).close()
    outs = [tmp_path / f"worker-{n}.out" for n in range(WORKERS)]
    args = ["--evaluate", url, "s", str(EVALUATIONS), str(ITEMS)]
    workers = []
    for n, out in enumerate(outs):
        with out.open("w") as sink:  # a file, not a pipe: nothing blocks on a full pipe
            workers.append(
                subprocess.Popen(
                    [sys.executable, str(WORKER), *args, str(n)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                )
            )
    try:
        # every worker has loaded its pack and recorded an evaluation: all are under way
        wait_until(lambda: all(lines_of(out) for out in outs), deadline, "workers start")
        time.sleep(0.3)
        for worker in workers[:KILLED]:
            os.kill(worker.pid, signal.SIGKILL)  # mid-run: maybe mid-transaction
        postgres_server.restart()
        wait_until(lambda: all(w.poll() is not None for w in workers), deadline, "workers end")
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert [w.returncode for w in workers[KILLED:]] == [0] * (WORKERS - KILLED)
    assert [w.returncode for w in workers[:KILLED]] == [-signal.SIGKILL] * KILLED
    assert all(len(lines_of(out)) < EVALUATIONS for out in outs[:KILLED])  # killed mid-run
    printed = [line.split() for out in outs for line in lines_of(out)]
    assert [p for p in printed if len(p) != 5] == []  # no error, no traceback
    for out in outs[KILLED:]:
        assert len(lines_of(out)) == EVALUATIONS  # every evaluation acknowledged
    acknowledged = {int(i): (item, int(n), int(f), a) for i, item, n, f, a in printed}
    assert len(acknowledged) == len(printed)  # no row acknowledged twice

    with open_ledger(url) as ledger:
        rows = ledger.read(
            lambda tx: tx.all(
                "SELECT id, item, attempt, final, action FROM attempts WHERE session = 's'"
                " ORDER BY id"
            )
        )
        counters = ledger.read(lambda tx: tx.all("SELECT item, last FROM item_counters"))
    recorded = {int(i): (item, int(n), int(f), a) for i, item, n, f, a in rows}
    # no acknowledged row lost, and each as it was acknowledged
    assert {i: recorded.get(i) for i in acknowledged} == acknowledged
    # a killed worker may have committed its last evaluation without printing it
    assert len(recorded) - len(acknowledged) <= KILLED
    assert len(recorded) >= (WORKERS - KILLED) * EVALUATIONS
    # every item counted every evaluation recorded of it: none lost, none twice
    per_item = Counter(item for item, *_ in recorded.values())
    assert dict(counters) == dict(per_item)
    assert len(per_item) == ITEMS

    runs: dict[str, list[list[tuple[int, int, str]]]] = {}
    for item, number, final, action in recorded.values():  # by id: the order of commits
        item_runs = runs.setdefault(item, [[]])
        item_runs[-1].append((number, final, action))
        if final:
            item_runs.append([])  # the next evaluation of the item starts a new run
    finished = 0
    for item_runs in runs.values():
        for run in item_runs:
            assert [n for n, _, _ in run] == list(range(1, len(run) + 1))  # 1..k, no gap
            assert [f for _, f, _ in run[:-1]] == [0] * (len(run) - 1)  # final: the last only
        finished += sum(1 for run in item_runs if run)
        assert all(run[-1][1] == 1 for run in item_runs[:-1])  # each ended run: one final
    actions = Counter(action for *_, action in recorded.values())
    assert set(actions) == {"PROCEED", "REPAIR", "NEEDS_HUMAN"}  # passing and failing outputs
    assert finished >= len(recorded) // 2
