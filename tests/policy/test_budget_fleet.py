"""A fleet budget on one PostgreSQL ledger: 16 worker processes share a budget of 40
repairs per hour for a block; exactly 40 repairs are made, and every further failure takes
the budget's action, naming it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from pg_server import PostgresServer

from engine.ledger.connection import open_ledger

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("budget_worker.py")
WORKERS = 16
ITEMS = 5  # 80 items in all, each wanting one repair: 40 more than the budget allows

PACK = """rulepack: fleet-budget
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: 1
    after_failure: NEEDS_HUMAN
budgets:
  verdict-repairs:
    counts: repairs
    limit: 40
    per: fleet
    window: 1h
    blocks: [VERDICT]
    action: {action: DEGRADE, default: {answer: UNKNOWN}}
breakers:
  # never opens (no share is below 0): here so that every worker takes the breaker's row
  # too, in the same transactions, without waiting on another for ever
  watching:
    blocks: [VERDICT]
    last: 5
    min_success: 0
    cooldown: 60s
    action: NEEDS_HUMAN
"""


def test_sixteen_workers_make_exactly_the_forty_repairs_the_budget_allows(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.create_database()
    (tmp_path / "pack").mkdir()
    (tmp_path / "pack" / "pack.yaml").write_text(PACK, encoding="utf-8")
    with open_ledger(url):
        pass  # the schema, created once before the workers start
    start_at = time.time() + 8  # every worker has loaded the pack by then
    began = time.monotonic()
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(tmp_path / "pack"), url, str(n), str(ITEMS),
             str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(WORKERS)
    ]  # fmt: skip
    lines = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=240)
            assert worker.returncode == 0, err
            lines += [json.loads(line) for line in out.splitlines()]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert time.monotonic() - began < 240
    assert len(lines) == WORKERS * ITEMS
    repaired = [line for line in lines if line["calls"] == 2]
    assert len(repaired) == 40  # exactly the budget's repairs were made
    assert {line["action"] for line in repaired} == {"PROCEED"}
    refused = [line for line in lines if line["calls"] == 1]
    assert len(refused) == WORKERS * ITEMS - 40
    assert Counter(line["action"] for line in refused) == {"DEGRADE": len(refused)}
    assert {line["reason"] for line in refused} == {
        "budget 'verdict-repairs' spent: 40 of 40 repairs per hour across the fleet"
    }
    with open_ledger(url) as ledger:
        paid = ledger.read(lambda tx: tx.one("SELECT count(*), count(DISTINCT scope)"
                                             " FROM budget_spend"))  # fmt: skip
        rules = ledger.read(
            lambda tx: tx.all("SELECT rule, count(*) FROM attempts GROUP BY rule ORDER BY rule")
        )
    assert paid is not None and (paid[0], paid[1]) == (40, 1)  # 40 calls, the fleet's
    assert dict(rules) == {
        "attempt:1": 40,  # the failures whose repair was paid for
        "pass": 40,  # the repairs' good outputs
        "budget:verdict-repairs": WORKERS * ITEMS - 40,
    }
