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
        result = engine.run(
            pack,
            "VERDICT",
            _reply,
            nonce=NONCE,
            vars={"criterion": "AC1"},
            item=f"item-{item}",
            model="bench-model",
            **options,
        )
        assert result.decision.action == "PROCEED", result.decision.reason
        assert len(result.attempts) == 2
    return (time.perf_counter() - started) / (2 * items)


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
    args = parser.parse_args()
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
