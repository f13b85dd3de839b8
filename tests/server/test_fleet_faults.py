"""The fleet of "done means": `rules serve --workers 2` on PostgreSQL, 32 clients running
repair loops for 20 s while a worker is killed with SIGKILL and the database restarted.
The database also stops answering for 8 s (its processes stopped), longer than the
requests' time limit (--timeout 5): the clients get 503, and the writes they were answered
503 for were once committed when the database went on. Every attempt answered 200 is in
the ledger once, as answered; every item's attempts are numbered 1..k; a request answered
with an error recorded nothing; nothing is answered 500."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

import httpx
from pg_server import PostgresServer
from server_process import running_server

from conftest import REPO
from engine.ledger.connection import open_ledger

pytestmark = pytest.mark.slow

BAD = (REPO / "examples" / "sentinel" / "verdict_bad.txt").read_text(encoding="utf-8")
REQUEST = {"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
CLIENTS, SECONDS = 32, 20.0  # the database is down 8 s of them, past --timeout 5


def workers_of(pid: int) -> list[int]:
    """The worker processes of uvicorn's supervisor ``pid`` (spawned interpreters)."""
    found = []
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        command = Path(f"/proc/{child}/cmdline").read_bytes()
        if b"spawn_main" in command:
            found.append(int(child))
    return found


def test_a_served_fleet_through_a_worker_kill_and_a_database_restart(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    url = postgres_server.create_database()
    open_ledger(url).close()
    stop = threading.Event()
    args = ("--pack", "sentinel", "--workers", "2", "--ledger", url, "--timeout", "5")
    with running_server(tmp_path, *args) as server:

        def client(number: int) -> dict[str, Any]:
            answered: list[tuple[int, int, str]] = []  # (attempt_id, attempt, item)
            errors: Counter[str] = Counter()
            unknown = 0  # requests whose connection broke: recorded or not, unknown
            broken: set[str] = set()  # their items
            refused: set[str] = set()  # the items of requests answered with an error
            loop = 0
            with httpx.Client(base_url=server.url, timeout=30) as http:
                while not stop.is_set():
                    loop += 1
                    item = f"c{number}-{loop}"
                    for _ in range(2):  # REPAIR, then NEEDS_HUMAN: a repair loop's end
                        try:
                            answer = http.post(
                                f"/v1/sessions/s{number}/outputs",
                                json={**REQUEST, "output": BAD, "item": item},
                            )
                        except httpx.TransportError:
                            unknown += 1
                            broken.add(item)
                            break
                        if answer.status_code != 200:
                            errors[f"{answer.status_code} {answer.json().get('type')}"] += 1
                            refused.add(item)
                            break
                        document = answer.json()
                        answered.append((document["attempt_id"], document["attempt"], item))
            return {
                "answered": answered,
                "errors": errors,
                "unknown": unknown,
                "broken": broken,
                "refused": refused,
            }

        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            running = [pool.submit(client, n) for n in range(CLIENTS)]
            started = time.monotonic()
            time.sleep(SECONDS / 4)
            victim = workers_of(server.process.pid)[0]
            os.kill(victim, signal.SIGKILL)
            time.sleep(SECONDS / 4)
            postgres_server.restart()
            time.sleep(SECONDS / 8)
            postgres_server.frozen_for(8)  # longer than --timeout 5: answered 503
            time.sleep(max(0.0, SECONDS - (time.monotonic() - started)))
            stop.set()
            results = [future.result(timeout=120) for future in running]
        output = server.output()

    errors = sum((r["errors"] for r in results), Counter())
    assert not [e for e in errors if not e.startswith("503 ")], errors  # no 500, no 4xx
    assert sum(errors.values()) >= CLIENTS // 2  # the frozen database: answered 503
    answered = [row for r in results for row in r["answered"]]
    assert len(answered) > CLIENTS * 10, len(answered)
    with open_ledger(url) as ledger:
        rows = ledger.read(
            lambda tx: tx.all("SELECT id, session, item, attempt FROM attempts ORDER BY id")
        )
    # the item is recorded as the key the session makes of the name given
    recorded = {int(i): (session, json.loads(item)["item"], int(n)) for i, session, item, n in rows}
    # every 200 is in the ledger once, as it was answered
    assert len({i for i, _, _ in answered}) == len(answered)
    assert {i: recorded.get(i)[1:] if i in recorded else None for i, _, _ in answered} == {
        i: (item, n) for i, n, item in answered
    }
    # a request answered with an error recorded nothing: only a request whose connection
    # broke (the killed worker's) may have been recorded unanswered
    unknown = sum(r["unknown"] for r in results)
    assert len(recorded) - len(answered) <= unknown, (len(recorded), len(answered), unknown)
    # each item of a request answered with an error holds exactly its answered attempts
    broken = set().union(*(r["broken"] for r in results))
    refused = set().union(*(r["refused"] for r in results)) - broken
    assert refused
    by_id = {i: item for i, _, item in answered}
    extra = [
        (i, item) for i, (_, item, _) in recorded.items() if item in refused and i not in by_id
    ]
    assert extra == [], f"{len(extra)} attempts recorded for requests answered 503: {extra[:5]}"
    # every item's attempts are numbered 1..k
    by_item: dict[str, list[int]] = {}
    for _, item, n in recorded.values():
        by_item.setdefault(item, []).append(n)
    assert all(ns == list(range(1, len(ns) + 1)) for ns in by_item.values())
    assert "Traceback" not in output or "SIGKILL" in output, output[-3000:]
