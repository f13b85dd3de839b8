"""Parsing throughput of the sentinel pack, reported as ratios (run: python benchmarks/parse_throughput.py).

Ratios compare against reading the same bytes with no parsing, so the numbers travel
between machines: "parse costs N x a plain split of the text into lines".
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import engine

NONCE = "4F2C9A"
VERDICT = "\n".join(["<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>", "ANSWER=YES", 'REASON="fine"',
                     "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>"])


def best_of(runs: int, action: object) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    pack = engine.load_pack("sentinel")
    small = [VERDICT.replace("fine", f"fine {i}") for i in range(2000)]
    big = ("prose line\n" * 90_000) + VERDICT  # ~1 MB

    baseline_small = best_of(5, lambda: [t.split("\n") for t in small])
    parse_small = best_of(5, lambda: [pack.parse("VERDICT", t, nonce=NONCE,
                                                 vars={"criterion": "AC1"}) for t in small])
    baseline_big = best_of(5, lambda: big.split("\n"))
    parse_big = best_of(5, lambda: pack.parse("VERDICT", big, nonce=NONCE,
                                              vars={"criterion": "AC1"}))

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.jsonl"
        source.write_text("\n".join(json.dumps({"id": i, "block": "VERDICT", "nonce": NONCE,
                                                "vars": {"criterion": "AC1"}, "text": t})
                                    for i, t in enumerate(small * 5)))
        startup = statistics.median(
            _timed([sys.executable, "-m", "engine", "check", "builtin:core"]) for _ in range(3))
        batch = statistics.median(
            _timed([sys.executable, "-m", "engine", "parse", "--pack", "sentinel", "--jsonl",
                    str(source)]) for _ in range(3))

    print(f"small blocks: {parse_small / len(small) * 1e6:.0f} us/block, "
          f"{parse_small / baseline_small:.0f}x a plain line split")
    print(f"1 MB output:  {parse_big * 1e3:.1f} ms, {parse_big / baseline_big:.1f}x a plain "
          "line split")
    print(f"10,000-record jsonl: {batch:.2f} s in one process, "
          f"{batch / startup:.1f}x the start-up of `rules check builtin:core`")


def _timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=False)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
