"""Benchmark of prefix checks on streamed outputs that pass: what they add.

    python benchmarks/streams.py [--repeat 15] [--chunk 16]

A streamed output that never fails definitively is read whole and evaluated as today; the
prefix checks (engine.contracts.kind.prefix_reader, asked by engine.session.stream.Watch as
the text grows) are the only extra work. For each output below it measures, in this
process and interleaved, the same stream read in chunks of ``--chunk`` characters (about
what model SDKs send per event) with the checks and with them switched off (no prefix
reader), and prints the least CPU time of each (of ``--repeat`` samples of about 50 ms,
interleaved) and their ratio:

* ``read+evaluate``: the Watch over every chunk, then the contract's evaluation of the
  whole text (reusing what the checks read, as the engine does): the engine's own work on
  a stream;
* ``engine.run``: the whole loop around a client returning the stream (first prompt, the
  evaluation, the decision, the attempt recorded in a SQLite session ledger; one session
  per case and mode, created before the runs are timed).

Outputs: a sentinel PLAN of 7.5 KB (50 files, the most its grammar allows) and a VERDICT of
0.2 KB,
and a JSON document of 1 MB for a contract reading the whole output with
``additionalProperties: false``. Exit status 1 when a stream that passes fails (a prefix
check that is wrong), else 0.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import engine  # noqa: E402
import engine.session.stream as stream_module  # noqa: E402
from engine.contracts.kind import EvaluationInput, prefix_reader  # noqa: E402
from engine.session.stream import Watch  # noqa: E402

NONCE = "4F2C9A"

JSON_SCHEMA = {
    "type": "object",
    "required": ["id", "notes"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
}
JSON_PACK = """rulepack: stream-bench
version: 1.0.0
extends: [builtin:core]
contracts:
  doc:
    kind: json
    schema_file: doc.schema.json
    extract: whole
templates:
  first: {file: prompts/doc.md.j2, purpose: initial}
prompts:
  doc: first
"""


def plan_output(pack: engine.Pack) -> str:
    """A PLAN block of the sentinel pack that passes, 7.5 KB."""
    files = [
        f'- path=src/module_{i}.py action=add rationale="part {i} of the parser, its own '
        'module, with the reasons it stands alone and the tests that cover it"'
        for i in range(50)
    ]
    lines = [
        f"<<<PLAN:V1:NONCE={NONCE}>>>",
        "TASK_ID=T-1",
        'TITLE="Add the parser"',
        "SUMMARY=",
        "  Build the parser.",
        "  Keep it small.",
        "FILES:",
        *files,
        "ACCEPTANCE:",
        '- id=AC1 text="parse returns data for valid blocks"',
        "ESTIMATED_DIFF=120",
        f"<<<END_PLAN:NONCE={NONCE}>>>",
    ]
    return "\n".join(lines) + "\n"


def json_output() -> str:
    notes = [f"note {i}: " + "x" * 90 for i in range(10_000)]
    return json.dumps({"id": "T1", "notes": notes})


def chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def read_and_evaluate(
    pack: engine.Pack, block: str, parts: list[str], checks: bool, **inputs: Any
) -> str:
    contract = pack.contract(block)
    params = inputs.get("vars", {})
    inputs_ = EvaluationInput(None, inputs.get("nonce"), params)
    # the reader made at the first ask, as engine.run makes it
    watch = Watch(None, 64 << 20, (lambda: prefix_reader(contract, inputs_)) if checks else None)
    for part in parts:
        if watch.feed(part):
            raise SystemExit(f"{block}: a stream that passes was cut: {watch.failure}")
    shared = watch.shared()  # what the checks already read, as engine.run reuses it
    output = watch.output()
    verdict = pack.evaluate(block, output, inputs.get("nonce"), params, shared=shared)
    return verdict.status


def timed(work: Callable[[], Any], times: int) -> float:
    """CPU seconds of this process per run of ``work``, over ``times`` runs: the machine's
    other work (a shared CI runner) moves wall-clock time much more than this."""
    start = time.process_time()
    for _ in range(times):
        work()
    return (time.process_time() - start) / times


def compare(
    name: str, with_checks: Callable[[], Any], without: Callable[[], Any], repeat: int
) -> float:
    """The least time of ``repeat`` interleaved runs of each (the least is the one other
    work on the machine disturbed least), and the share the checks add."""
    a: list[float] = []
    b: list[float] = []
    once = timed(without, 1)
    times = max(1, int(0.05 / max(once, 1e-6)))  # a sample of about 50 ms
    for _ in range(repeat):
        b.append(timed(without, times))
        a.append(timed(with_checks, times))
    on, off = min(a), min(b)
    ratio = on / off - 1
    print(f"| {name} | {off * 1000:.2f} ms | {on * 1000:.2f} ms | {ratio:+.1%} |")
    return ratio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--chunk", type=int, default=16)
    args = parser.parse_args()

    sentinel = engine.load_pack("sentinel")
    work = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    try:
        folder = work / "pack"
        (folder / "prompts").mkdir(parents=True)
        (folder / "pack.yaml").write_text(JSON_PACK, encoding="utf-8")
        (folder / "doc.schema.json").write_text(json.dumps(JSON_SCHEMA), encoding="utf-8")
        (folder / "prompts" / "doc.md.j2").write_text("Write the document.\n", encoding="utf-8")
        json_pack = engine.load_pack(str(folder))

        verdict = (ROOT / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
        cases = [
            ("sentinel PLAN, 7.5 KB", sentinel, "PLAN", plan_output(sentinel), {"nonce": NONCE}),
            ("sentinel VERDICT, 0.2 KB", sentinel, "VERDICT", verdict,
             {"nonce": NONCE, "vars": {"criterion": "AC1"}}),
            ("json, 1 MB", json_pack, "doc", json_output(), {}),
        ]  # fmt: skip
        worst = 0.0
        print(f"chunks of {args.chunk} characters, least of {args.repeat} interleaved runs\n")
        print("| stream that passes | checks off | checks on | added |")
        print("| --- | --- | --- | --- |")
        for name, pack, block, text, inputs in cases:
            parts = chunks(text, args.chunk)
            status = read_and_evaluate(pack, block, parts, True, **inputs)
            for checks in (True, False):  # each session's ledger made before the timing
                run_once(pack, block, parts, work, checks, inputs)
            if status == "fail":
                print(f"{name}: the output does not pass: fix the benchmark", file=sys.stderr)
                return 1
            worst = max(worst, compare(
                f"{name}: read+evaluate ({len(parts)} chunks)",
                partial(read_and_evaluate, pack, block, parts, True, **inputs),
                partial(read_and_evaluate, pack, block, parts, False, **inputs),
                args.repeat,
            ))  # fmt: skip
            worst = max(worst, compare(
                f"{name}: engine.run",
                partial(run_once, pack, block, parts, work, True, inputs),
                partial(run_once, pack, block, parts, work, False, inputs),
                args.repeat,
            ))  # fmt: skip
        print(f"\nworst: prefix checks add {worst:+.1%}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run_once(
    pack: engine.Pack,
    block: str,
    parts: list[str],
    work: Path,
    checks: bool,
    inputs: dict[str, Any],
) -> None:
    session = work / f"{pack.name}-{block}-{'on' if checks else 'off'}"
    original = stream_module.prefix_reader
    if not checks:
        stream_module.prefix_reader = lambda contract, output: None  # type: ignore[assignment]
    try:

        def call(prompt: str) -> Iterator[str]:
            return iter(parts)

        result = engine.run(pack, block, call, session=str(session), **inputs)
        if result.verdict.status == "fail":
            raise SystemExit(f"{block}: a stream that passes failed: {result.verdict.failures}")
    finally:
        stream_module.prefix_reader = original


if __name__ == "__main__":
    sys.exit(main())
