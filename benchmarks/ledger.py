"""Benchmark of the ledger: attempts recorded per second by 1, 4 and 16 writer processes.

    python benchmarks/ledger.py [--url postgresql://...] [--records N] [--items N]
                                [--writers 1,4,16] [--rounds N] [--format text|json]

On SQLite (a file in a temporary folder) and on PostgreSQL: the server at ``--url`` (each
run in a new database it creates there), else a server this script starts itself with the
test suite's helper (``tests/pg_server.py``: ``initdb`` and ``pg_ctl`` from Debian's
postgresql package; fsync on, as a real server). Each writer records ``--records``
attempts on items drawn at random from ``--items`` shared ones through ``engine.ledger.attempts``
(one transaction each: the item's number allocated, the row inserted). The limit is a
plain loop of the same rows as single-statement ``INSERT`` transactions (psycopg on
PostgreSQL, sqlite3 on SQLite) by the same number of processes on the same server.
Writers connect first and start together; the time is from the first start to the last
end. It prints rows per second (the median of ``--rounds`` runs, the ledger's and the plain
loop's interleaved) and the ratio ledger / plain loop (1.0: as fast as the limit). It
measures, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

COLUMNS = (
    "session, ts, pack, block, item, attempt, status, action, reason, rule, final, nonce,"
    " error, output_sha256, output_chars"
)


def _row(item: str, number: int) -> tuple[Any, ...]:
    return (
        "bench",
        "2026-01-12T14:30:00Z",
        "bench",
        "B",
        item,
        number,
        "fail",
        "retry",
        "a required field is missing",
        "missing-field",
        0,
        "4F2C9A",
        "field 'answer' is missing",
        "0" * 64,
        1200,
    )


def _writer(
    kind: str, url: str, count: int, items: int, start: int, barrier: Any, results: Any
) -> None:
    """One writer process: connect, wait for the others, record ``count`` rows."""
    from engine.ledger.attempts import Attempt, Attempts, ItemAttempt
    from engine.ledger.connection import open_ledger

    pick = random.Random(start)  # each writer its own sequence, the same for both loops
    names = [f"item-{pick.randrange(items)}" for _ in range(count)]
    marks = ", ".join("?" for _ in COLUMNS.split(","))
    if kind == "ledger":
        attempt = Attempt(
            pack="bench",
            status="fail",
            action="retry",
            reason="a required field is missing",
            rule="missing-field",
            final=False,
            output_sha256="0" * 64,
            output_chars=1200,
            error="field 'answer' is missing",
            nonce="4F2C9A",
        )
        ledger = open_ledger(url)
        attempts = Attempts(ledger)
        barrier.wait()
        began = time.monotonic()
        for item in names:
            attempts.record_attempt(ItemAttempt("bench", "B", item, attempt))
        ended = time.monotonic()
        ledger.close()
    elif url.startswith("postgresql://"):
        import psycopg

        sql = f"INSERT INTO attempts ({COLUMNS}) VALUES ({marks.replace('?', '%s')})"
        with psycopg.connect(url, autocommit=True) as conn:
            barrier.wait()
            began = time.monotonic()
            for n, item in enumerate(names):
                conn.execute(sql, _row(item, n))
            ended = time.monotonic()
    else:
        db = sqlite3.connect(url, timeout=60, isolation_level=None)
        db.execute("PRAGMA busy_timeout = 60000")
        db.execute("PRAGMA synchronous = NORMAL")
        sql = f"INSERT INTO attempts ({COLUMNS}) VALUES ({marks})"
        barrier.wait()
        began = time.monotonic()
        for n, item in enumerate(names):
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, _row(item, n))
            db.execute("COMMIT")
        ended = time.monotonic()
        db.close()
    results.put((began, ended))


def measure(kind: str, url: str, writers: int, records: int, items: int) -> float:
    """Rows per second of ``writers`` processes recording ``records`` rows each."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers)
    results = context.Queue()
    processes = [
        context.Process(
            target=_writer, args=(kind, url, records, items, n, barrier, results), daemon=True
        )
        for n in range(writers)
    ]
    for process in processes:
        process.start()
    spans = [results.get(timeout=900) for _ in processes]
    for process in processes:
        process.join()
        if process.exitcode != 0:
            raise SystemExit(f"a {kind} writer failed (exit {process.exitcode})")
    began = min(s for s, _ in spans)
    ended = max(e for _, e in spans)
    return writers * records / (ended - began)


class Backend:
    """Fresh ledgers of one backend: ``fresh()`` gives the URL of a new, empty one."""

    def __init__(self, name: str, base: str | None, folder: Path) -> None:
        self.name, self.base, self.folder = name, base, folder
        self.count = 0

    def fresh(self) -> str:
        from engine.ledger.connection import open_ledger

        self.count += 1
        if self.base is None:
            url = str(self.folder / f"ledger-{self.count}.db")
        else:
            import psycopg

            name = f"bench_{os.getpid()}_{self.count}"
            with psycopg.connect(self.base, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"CREATE DATABASE {name}")
            url = self.base.rsplit("/", 1)[0] + "/" + name
        open_ledger(url).close()  # the schema, created before the clock starts
        return url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a PostgreSQL server's URL (default: start one)")
    parser.add_argument("--records", type=int, default=300, help="rows per writer")
    parser.add_argument("--items", type=int, default=20, help="items the writers share")
    parser.add_argument("--writers", default="1,4,16")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each (the median)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    counts = [int(n) for n in args.writers.split(",")]
    server = None
    if args.url is None:
        sys.path.insert(0, str(REPO / "tests"))
        from pg_server import PostgresServer, missing_reason

        reason = missing_reason()
        if reason:
            print(f"PostgreSQL skipped: {reason}", file=sys.stderr)
        else:
            server = PostgresServer()
    base = args.url or (server.url() if server else None)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        backends = [Backend("sqlite", None, Path(folder))]
        if base:
            backends.append(Backend("postgresql", base, Path(folder)))
        try:
            for backend in backends:
                for writers in counts:
                    rates: dict[str, list[float]] = {"ledger": [], "plain": []}
                    for _ in range(args.rounds):  # interleaved: both see the same load
                        for kind, found in rates.items():
                            found.append(
                                measure(kind, backend.fresh(), writers, args.records, args.items)
                            )
                    ledger = statistics.median(rates["ledger"])
                    plain = statistics.median(rates["plain"])
                    results.append(
                        {
                            "backend": backend.name,
                            "writers": writers,
                            "ledger_rows_per_s": round(ledger),
                            "plain_insert_rows_per_s": round(plain),
                            "ratio": round(ledger / plain, 2),
                        }
                    )
                    if args.format == "text":
                        print(
                            f"{backend.name:<10} {writers:>2} writers: ledger {ledger:8.0f} rows/s,"
                            f" plain INSERT loop {plain:8.0f} rows/s, ratio {ledger / plain:.2f}",
                            flush=True,
                        )
        finally:
            if server is not None:
                server.stop()
    if args.format == "json":
        print(
            json.dumps(
                {
                    "python": platform.python_version(),
                    "cpus": os.cpu_count(),
                    "records_per_writer": args.records,
                    "rounds": args.rounds,
                    "items": args.items,
                    "results": results,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
