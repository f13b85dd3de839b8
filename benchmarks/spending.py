"""What governing the model calls costs a session output: usage, budgets and breakers.

    python benchmarks/spending.py [--items 40] [--rounds 5] [--url postgresql://...]

Two packs decide the same outputs of the sentinel VERDICT block: ``plain`` (the shipped
pack) and ``governed`` (the same block with a fleet budget of repairs, a session budget of
calls, a breaker on repairs and a price for the model, none of them ever reached). Each
item is one ``engine.run`` of two calls (a failing VERDICT, then its repair), the client
returning a ``ModelReply`` with tokens, so both packs record the usage and the governed one
also counts, prices and watches every call in the same transaction. It prints the
milliseconds per output (the least of ``--rounds`` rounds, the two packs interleaved in each
so both see the same load), the ratio governed / plain of those, and the ratio of each
round's pair (the two packs one after the other, under the same load) as its median and
its spread (least and most), on SQLite (a session folder) and on PostgreSQL (the server
at ``--url``, else one this script starts with the test suite's ``tests/pg_server.py``;
skipped, saying why, without PostgreSQL's binaries). On a machine shared with other work
the spread says how far one figure can be trusted. The issue's target is a ratio of at
most 1.10. It measures; it does not judge (exit status 0).

Two counts that the load does not change, on SQLite, per item after three of warm-up:

    python benchmarks/spending.py --items 10 --statements
    valgrind --tool=callgrind --instr-atstart=no \
        python benchmarks/spending.py --items 10 --callgrind governed

``--statements`` prints the SQL statements each pack runs per item (SQLite's trace),
``--callgrind PACK`` (``plain`` or ``governed``; run it under valgrind as shown) turns
callgrind's counting on for the items only: its ``Collected`` figure divided by
``--items`` is the instructions per item, Python and SQLite included.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import engine  # noqa: E402

NONCE = "4F2C9A"
BAD = (
    f'<<<VERDICT:V1:AC1:NONCE={NONCE}>>>\nANSWER="YES"\n'
    'REASON="All acceptance criteria are satisfied"\n'
    f"<<<END_VERDICT:AC1:NONCE={NONCE}>>>\n"
)
GOOD = BAD.replace('ANSWER="YES"', "ANSWER=YES")

GOVERNED = """rulepack: governed-verdict
version: 1.0.0
extends: [builtin:sentinel]
budgets:
  fleet-repairs:
    description: repairs the fleet may make an hour (never reached here)
    counts: repairs
    limit: 1000000
    per: fleet
    window: 1h
    blocks: [VERDICT]
    action: {action: NEEDS_HUMAN, reason: spent}
  session-calls:
    description: calls one session may make (never reached here)
    counts: calls
    limit: 1000000
    per: session
    blocks: [VERDICT]
    action: {action: NEEDS_HUMAN, reason: spent}
breakers:
  repairs-work:
    description: repairs that do not work are stopped (they all work here)
    blocks: [VERDICT]
    on: [PARSE_ERROR]
    last: 10
    min_repairs: 5
    min_success: 0.3
    cooldown: 10m
    action: {action: NEEDS_HUMAN, reason: repairs are not working}
model_calls:
  pricing:
    bench-model: {input: 0.15, output: 0.60}
"""


def _reply(prompt: str) -> Any:
    """A failing block to a first prompt, a passing one to a repair, with usage."""
    text = GOOD if "format-repair agent" in prompt else BAD
    return engine.ModelReply(text, tokens_in=len(prompt) // 4, tokens_out=40, model="bench-model")


def _round(pack: Any, items: int, session: Path, ledger: str | None) -> float:
    """Seconds per output of ``items`` runs of two calls each under ``pack``, after one
    run that creates the session's ledger."""
    options: dict[str, Any] = {"session": session}
    if ledger is not None:
        options["ledger"] = ledger
    started = 0.0
    for item in range(-1, items):  # item -1 creates the session's ledger: not timed
        if item == 0:
            started = time.perf_counter()
        result = _item(pack, item, **options)
        assert result.decision.action == "PROCEED", result.decision.reason
        assert len(result.attempts) == 2
    return (time.perf_counter() - started) / (2 * items)


def _packs(folder: Path) -> dict[str, Any]:
    (folder / "governed").mkdir()
    (folder / "governed" / "pack.yaml").write_text(GOVERNED, encoding="utf-8")
    return {
        "plain": engine.load_pack("sentinel"),
        "governed": engine.load_pack(folder / "governed"),
    }


def _item(pack: Any, item: int, **options: Any) -> Any:
    """One item of the benchmark: a failing VERDICT, then its repair."""
    return engine.run(
        pack,
        "VERDICT",
        _reply,
        nonce=NONCE,
        vars={"criterion": "AC1"},
        item=f"item-{item}",
        model="bench-model",
        **options,
    )


def _items(pack: Any, session: Path, first: int, count: int) -> None:
    for item in range(first, first + count):
        _item(pack, item, session=session)


def statements(folder: Path, items: int) -> list[str]:
    """The SQL statements each pack runs per item on SQLite, after three of warm-up."""
    import sqlite3

    from engine.ledger import connection

    ran: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(ran.append)
        return db

    connection.sqlite3.connect = traced  # type: ignore[assignment]
    lines = []
    for name, pack in _packs(folder).items():
        _items(pack, folder / name, 0, 3)
        ran.clear()
        _items(pack, folder / name, 3, items)
        lines.append(f"{name:<10}{len(ran) / items:>7.1f} statements per item")
    return lines


def callgrind(folder: Path, items: int, name: str) -> None:
    """``items`` items of one pack with callgrind counting (after three of warm-up)."""
    import os
    import subprocess

    pack = _packs(folder)[name]
    _items(pack, folder / name, 0, 3)
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True)
    _items(pack, folder / name, 3, items)
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True)


def measure(folder: Path, items: int, rounds: int, ledgers: list[Any]) -> list[str]:
    plain = engine.load_pack("sentinel")
    (folder / "governed").mkdir()
    (folder / "governed" / "pack.yaml").write_text(GOVERNED, encoding="utf-8")
    governed = engine.load_pack(folder / "governed")
    lines = [
        f"{'backend':<11}{'plain ms':>10}{'governed ms':>13}{'ratio':>8}"
        f"{'median of rounds':>18}{'spread':>14}"
    ]
    for ledger in ledgers:
        best = {"plain": float("inf"), "governed": float("inf")}
        pairs = []
        for number in range(rounds):
            took = {}
            # which pack goes first alternates: neither always meets the other's leftovers
            order = [("plain", plain), ("governed", governed)]
            for name, pack in order if number % 2 == 0 else order[::-1]:
                session = folder / f"{name}-{number}-{len(lines)}"
                url = None if ledger is None else ledger()
                took[name] = _round(pack, items, session, url)
                best[name] = min(best[name], took[name])
            pairs.append(took["governed"] / took["plain"])
        backend = "sqlite" if ledger is None else "postgresql"
        ratio = best["governed"] / best["plain"]
        spread = f"{min(pairs):.2f}..{max(pairs):.2f}"
        lines.append(
            f"{backend:<11}{best['plain'] * 1000:>10.2f}{best['governed'] * 1000:>13.2f}"
            f"{ratio:>8.2f}{statistics.median(pairs):>18.2f}{spread:>14}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=40, help="runs of two calls per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the least is shown)")
    parser.add_argument("--url", help="a PostgreSQL server's URL (default: start one)")
    parser.add_argument("--statements", action="store_true", help="count SQL statements")
    parser.add_argument("--callgrind", choices=["plain", "governed"], help="under valgrind")
    args = parser.parse_args()
    if args.statements or args.callgrind:
        with tempfile.TemporaryDirectory() as folder:
            if args.callgrind:
                callgrind(Path(folder), args.items, args.callgrind)
            else:
                print("\n".join(statements(Path(folder), args.items)))
        return
    server = None
    ledgers: list[Any] = [None]
    if args.url is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from pg_server import PostgresServer, missing_reason

        reason = missing_reason()
        if reason:
            print(f"PostgreSQL skipped: {reason}", file=sys.stderr)
        else:
            server = PostgresServer()
            ledgers.append(server.create_database)  # a new database for each session
    else:
        url = args.url
        ledgers.append(lambda: url)
    try:
        with tempfile.TemporaryDirectory() as folder:
            for line in measure(Path(folder), args.items, args.rounds, ledgers):
                print(line)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
