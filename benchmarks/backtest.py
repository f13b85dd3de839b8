"""Benchmark of `rules backtest`: a REASON limit lowered from 500 to 300 characters.

    python benchmarks/backtest.py [--records N] [--workers 1,2] [--keep DIR]

It generates N VERDICT records of the sentinel pack (a known number of them with reasons of
301 to 500 characters, some unparseable), copies the sentinel pack with REASON max 300,
backtests the copy against the shipped pack and checks that the pass->fail flips are
exactly the long reasons. It prints records/s for each worker count (each run a child
process: `rules backtest`), the rate of a single-process `rules parse --jsonl` over the same
records, the rate of one worker backtesting the copy alone (no baseline), and the peak memory
(ru_maxrss) of each run. Exit status 1 when the flip count is
wrong.

It also measures, in this process on the first 20,000 records, the least a backtest with a
baseline must do through the Pack API: decode each record and evaluate it under both packs
(the payload read once, as a backtest shares it), with no record checks, decisions or
tallies. Its rate against the same records' `rules parse --jsonl` path (decode, parse,
encode the result) bounds what one backtest worker can reach against parse --jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NONCE = "4F2C9A"
WORDS = [
    "the",
    "tests",
    "pass",
    "on",
    "CI",
    "and",
    "the",
    "acceptance",
    "criterion",
    "holds",
    "for",
    "every",
    "case",
]


def _reason(i: int, length: int) -> str:
    words = []
    total = 0
    k = i
    while total < length:
        word = WORDS[k % len(WORDS)]
        k = k * 7 + 3
        words.append(word)
        total += len(word) + 1
    return " ".join(words)[:length].rstrip().ljust(length, "x")


def generate(path: Path, count: int) -> int:
    """Write ``count`` VERDICT records to ``path``; return how many carry a reason of
    301-500 characters (every 7th record; every 50th record is unparseable)."""
    long_reasons = 0
    with path.open("w", encoding="utf-8") as out:
        for i in range(count):
            criterion = f"AC{i % 97}"
            if i % 50 == 49:
                text = (
                    f"<<<VERDICT:V1:{criterion}:NONCE={NONCE}>>>\n"
                    'ANSWER="YES"\nREASON="quoted answer"\n'
                    f"<<<END_VERDICT:{criterion}:NONCE={NONCE}>>>"
                )
            else:
                if i % 7 == 3:
                    length = 301 + (i * 37) % 200
                    long_reasons += 1
                else:
                    length = 1 + (i * 13) % 300
                answer = "YES" if i % 3 else "NO"
                text = (
                    f"<<<VERDICT:V1:{criterion}:NONCE={NONCE}>>>\nANSWER={answer}\n"
                    f'REASON="{_reason(i, length)}"\n<<<END_VERDICT:{criterion}:NONCE={NONCE}>>>'
                )
            record = {
                "id": f"r{i}",
                "block": "VERDICT",
                "nonce": NONCE,
                "vars": {"criterion": criterion},
                "text": text,
            }
            out.write(json.dumps(record) + "\n")
    return long_reasons


def strict_copy(folder: Path) -> Path:
    """The sentinel pack with REASON max 300 instead of 500."""
    target = folder / "sentinel-reason-300"
    shutil.copytree(ROOT / "rules" / "sentinel", target, dirs_exist_ok=True)
    pack_file = target / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8")
    rule = re.compile(r"(field: REASON, max: )500(, message: REASON exceeds )500( chars)")
    text, replaced = rule.subn(r"\g<1>300\g<2>300\g<3>", text)
    if replaced != 1:
        raise SystemExit("benchmark: REASON's max_len rule not found in rules/sentinel/pack.yaml")
    pack_file.write_text(text, encoding="utf-8")
    return target


def _rules() -> list[str]:
    return [sys.executable, "-m", "engine"]


def timed(command: list[str], stdout: int | None = subprocess.PIPE) -> tuple[float, int, bytes]:
    """Wall time, peak memory (KiB) of the child, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode not in (0, 1):
        raise SystemExit(f"benchmark: {' '.join(command)} failed: {done.stderr.decode()}")
    return elapsed, max(peak, before), done.stdout or b""


def run_backtest(
    pack: Path, records: Path, workers: int, baseline: str | None = "sentinel"
) -> tuple[float, int, dict[str, object]]:
    against = ["--baseline", baseline] if baseline else []
    elapsed, peak, out = timed(
        [
            *_rules(),
            "backtest",
            "--pack",
            str(pack),
            *against,
            "--workers",
            str(workers),
            "--format",
            "json",
            str(records),
        ]
    )
    return elapsed, peak, json.loads(out)


FLOOR_RECORDS = 20_000


def floor_rates(records: Path, pack: Path, runs: int = 5) -> tuple[float, float]:
    """Microseconds a record, best of ``runs``, in this process: ``rules parse --jsonl``'s
    path (decode, parse, encode the result), and the two verdicts alone (decode, then
    ``Pack.evaluate`` under the pack and under the shipped sentinel pack, reading shared)."""
    import io

    sys.path.insert(0, str(ROOT))
    from engine import load_pack
    from engine.pack.batch import parse_jsonl
    from engine.pack.cache import open_parsing_pack

    with records.open("rb") as source:
        lines = [line for _, line in zip(range(FLOOR_RECORDS), source, strict=False)]
    data = b"".join(lines)
    parser = open_parsing_pack("sentinel")
    packs = [load_pack(str(pack)), load_pack("sentinel")]
    encode = json.JSONEncoder(ensure_ascii=False).encode

    def parse() -> None:
        out = io.StringIO()
        for result in parse_jsonl(parser, io.BytesIO(data)):
            out.write(encode(result) + "\n")

    def verdicts() -> None:
        for line in lines:
            record = json.loads(line)
            shared: dict[str, object] = {}
            for one in packs:
                args = (record["block"], record["text"], record["nonce"], record["vars"])
                one.evaluate(*args, shared=shared)

    best = {parse: float("inf"), verdicts: float("inf")}
    for _ in range(runs):
        for work in best:
            start = time.perf_counter()
            work()
            best[work] = min(best[work], time.perf_counter() - start)
    return best[parse] / len(lines) * 1e6, best[verdicts] / len(lines) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument("--keep", help="folder for the generated files (kept)")
    args = parser.parse_args(argv)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="rules-backtest-"))
    folder.mkdir(parents=True, exist_ok=True)
    records = folder / "verdicts.jsonl"
    start = time.perf_counter()
    expected = generate(records, args.records)
    print(
        f"generated {args.records:,} records ({records.stat().st_size / 1e6:.0f} MB, "
        f"{expected:,} reasons of 301-500 chars) in {time.perf_counter() - start:.1f} s"
    )
    pack = strict_copy(folder)
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f} at start")
    elapsed, peak, _ = timed(
        [*_rules(), "parse", "--pack", "sentinel", "--jsonl", str(records)],
        stdout=subprocess.DEVNULL,
    )
    parse_rate = args.records / elapsed
    print(
        f"rules parse --jsonl (1 process)  {parse_rate:>10,.0f} records/s  "
        f"peak {peak / 1024:.0f} MB"
    )
    ok = True
    rates: dict[int, float] = {}
    for workers in [int(w) for w in args.workers.split(",")]:
        elapsed, peak, report = run_backtest(pack, records, workers)
        rates[workers] = args.records / elapsed
        flips = report["flips"]
        assert isinstance(flips, dict)
        got = flips.get("pass->fail", 0)
        ok = ok and got == expected
        label = f"backtest, {workers} worker{'s' if workers > 1 else ''}"
        print(
            f"{label:<33}{rates[workers]:>10,.0f} records/s  "
            f"peak {peak / 1024:.0f} MB (per process)  pass->fail {got:,} "
            f"({'as built' if got == expected else f'expected {expected:,}'})"
        )
    elapsed, peak, report = run_backtest(pack, records, 1, baseline=None)
    alone = args.records / elapsed
    print(
        f"{'backtest, 1 worker, no baseline':<33}{alone:>10,.0f} records/s  "
        f"peak {peak / 1024:.0f} MB  ({alone / parse_rate:.2f}x parse --jsonl)"
    )
    if 1 in rates:
        print(f"1 worker / parse --jsonl: {rates[1] / parse_rate:.2f}")
        for workers, rate in rates.items():
            if workers > 1:
                print(f"{workers} workers / 1 worker: {rate / rates[1]:.2f}")
    parse_us, verdicts_us = floor_rates(records, pack)
    print(
        f"in-process, first {min(args.records, FLOOR_RECORDS):,} records, best of 5: "
        f"parse --jsonl's path {parse_us:.1f} us/record; the two packs' verdicts alone "
        f"(no checks, decisions or tallies) {verdicts_us:.1f} us/record: one worker with a "
        f"baseline reaches at most {parse_us / verdicts_us:.2f}x parse --jsonl"
    )
    print(f"load average {os.getloadavg()[0]:.2f} at end")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
