"""Benchmark of the `tool_call` contract kind against the `json` kind, in one run.

    python benchmarks/tool_call.py [--repeat N] [--shape openai|anthropic|plain]

It writes a pack (in a temporary folder) with a json contract and a tool_call contract
whose one tool has the json contract's schema, then, for outputs of several sizes, builds a
tool call (OpenAI chat shape by default: the arguments as a JSON string) and a JSON document
of the same number of characters (the tool's arguments, padded in a string field the schema
allows), checks that both pass, and times `Pack.evaluate` on each (the best of N rounds of
many evaluations, CPU time of this process, the two taking turns). It prints the
microseconds per evaluation of each and their ratio (tool_call / json) per size. With
``--limit R``, exit status 1 when a tool call costs more than R times the JSON output of
its size (``--limit 1``: at most the same); without it, it measures and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import engine

SCHEMA = {
    "type": "object",
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "array", "items": {"type": "object"}},
        "note": {"type": "string"},
    },
}

PACK = """\
rulepack: bench
version: 1.0.0
extends: [builtin:core]
contracts:
  doc:
    kind: json
    schema_file: schema.json
  call:
    kind: tool_call
    tools:
      forecast:
        schema_file: schema.json
"""

SIZES = (200, 2_000, 20_000, 200_000)


def arguments(size: int) -> dict[str, Any]:
    """Arguments whose JSON is about ``size`` characters: a list of small day objects."""
    days: list[dict[str, Any]] = []
    while len(json.dumps(days)) < size - 60:
        n = len(days)
        days.append({"day": n, "high": 10 + n % 7, "low": n % 5, "sky": "cloudy"})
    return {"city": "Oslo", "unit": "celsius", "days": days}


def tool_call(args: dict[str, Any], shape: str) -> str:
    if shape == "anthropic":
        return json.dumps(
            {"content": [{"type": "tool_use", "id": "t1", "name": "forecast", "input": args}]}
        )
    if shape == "plain":
        return json.dumps({"name": "forecast", "arguments": args})
    function = {"name": "forecast", "arguments": json.dumps(args)}
    return json.dumps({"tool_calls": [{"id": "c1", "type": "function", "function": function}]})


def same_size_document(args: dict[str, Any], length: int) -> str:
    """The arguments as a JSON document of exactly ``length`` characters (a padded note)."""
    text = json.dumps({**args, "note": ""})
    return json.dumps({**args, "note": "x" * max(0, length - len(text))})


def per_evaluation(
    pack: engine.Pack, cases: tuple[tuple[str, str], ...], repeat: int
) -> list[float]:
    """The best CPU time of one evaluation of each (block, text), in seconds, over
    ``repeat`` rounds; the cases take turns within each round, so a busy machine slows
    them alike (CPU time of this process: other processes' load counts less)."""
    count = max(5, 400_000 // max(len(cases[0][1]), 1))
    best = [float("inf")] * len(cases)
    for _ in range(repeat):
        for index, (block, text) in enumerate(cases):
            start = time.process_time()
            for _ in range(count):
                pack.evaluate(block, text)
            best[index] = min(best[index], (time.process_time() - start) / count)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--shape", choices=("openai", "anthropic", "plain"), default="openai")
    parser.add_argument("--limit", type=float, default=None)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "pack.yaml").write_text(PACK, encoding="utf-8")
        (root / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
        pack = engine.load_pack(root)
        worst = 0.0
        print(f"shape {options.shape}; best of {options.repeat} rounds")
        print(f"{'chars':>8} {'json us':>10} {'tool_call us':>13} {'ratio':>7}")
        for size in SIZES:
            args = arguments(size)
            call = tool_call(args, options.shape)
            document = same_size_document(args, len(call))
            assert len(document) == len(call), (len(document), len(call))
            for block, text in (("doc", document), ("call", call)):
                verdict = pack.evaluate(block, text)
                assert verdict.status == "pass", (block, verdict.failures)
            json_cost, call_cost = per_evaluation(
                pack, (("doc", document), ("call", call)), options.repeat
            )
            ratio = call_cost / json_cost
            worst = max(worst, ratio)
            print(f"{len(call):>8} {json_cost * 1e6:>10.1f} {call_cost * 1e6:>13.1f} {ratio:>7.2f}")
        limit = "" if options.limit is None else f" (limit {options.limit:.2f})"
        print(f"worst ratio {worst:.2f}{limit}")
        return 0 if options.limit is None or worst <= options.limit else 1


if __name__ == "__main__":
    sys.exit(main())
