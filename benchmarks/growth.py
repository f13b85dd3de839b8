"""Linear growth: time and peak memory of evaluating outputs of 1, 8 and 64 MiB of each
contract kind, and the ratio per size step (8x the size should cost about 8x, not 64x).

Run from a clone, with the interpreter the engine is installed in:

    python benchmarks/growth.py [--quick] [--format text|json]

Each measurement runs in a fresh child process (this file with ``--child``), so its peak
resident memory (``ru_maxrss``) is its own: the interpreter and the loaded pack (the
``base`` column: the peak once the pack is loaded, before the output is built), the output
text and everything evaluating it holds; ``x (peak-base)`` is the growth of the part above
the base. ``time`` is the evaluation alone (``Pack.evaluate``), not start-up.
``--quick`` measures 1 and 8 MiB only.

The outputs, generated here, are of the kind each contract checks all the way through:

* sentinel: a valid VERDICT at the end of prose (builtin ``sentinel``);
* markdown: a gap resolution with one DISAGREE section per 8 KiB, every section checked
  (builtin ``gap-review``, ``engineer``);
* json: one document holding a list of items checked by ``items``, ``pattern`` and
  ``enum`` (a pack written to a temporary folder, ``max_chars`` raised to 256 MiB);
* json many: JSON lines of ~100-byte documents (same pack, ``max_documents`` 1,000,000);
* text: lines under ``require`` and ``forbid`` patterns and a line bound.

It measures; it does not judge: the exit status is 0 unless a child fails.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIB = 1 << 20
NONCE = "4F2C9A"
CRITERION = "AC1"
KINDS = ("sentinel", "markdown", "json", "json many", "text")

PACK = """\
rulepack: growth
version: 1.0.0
extends: [builtin:core]
contracts:
  doc:
    kind: json
    schema_file: schema.json
    max_chars: 268435456
  lines:
    kind: json
    schema_file: schema.json
    many: jsonl
    max_chars: 268435456
    max_documents: 1000000
  prose:
    kind: text
    max_lines: 10000000
    require:
      - {pattern: '^Summary:'}
    forbid:
      - {pattern: 'TODO[0-9]+'}
"""
ITEM = {"id": "T-1", "status": "todo", "tags": ["a", "b"], "note": "x" * 40}
SCHEMA = {
    "type": ["object", "array"],
    "items": {"$ref": "#/$defs/item"},
    "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
    "$defs": {
        "item": {
            "type": "object",
            "required": ["id", "status"],
            "properties": {
                "id": {"type": "string", "pattern": "^T-[0-9]+$"},
                "status": {"enum": ["todo", "done"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "note": {"type": "string", "maxLength": 1000},
            },
        }
    },
}
SECTION = (
    "## DISAGREE: ISSUE-R1-001\n\n**Reviewer Concern:**\n> the concern\n\n"
    "**Engineer Position:**\nThe position.\n\n**Rationale:**\n"
)
HEAD = (
    "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Proposed Solution\n"
    + "Validate every proposal in two tiers. " * 8
    + "\n\n### Trade-offs\nSome.\n\n"
)


def _repeat(unit: str, size: int, head: str = "", tail: str = "") -> str:
    count = max(1, (size - len(head) - len(tail)) // len(unit))
    return head + unit * count + tail


def load(kind: str, folder: Path) -> tuple[Any, str, str | None]:
    """The pack, block and nonce that check outputs of ``kind``."""
    import engine

    if kind == "sentinel":
        return engine.load_pack("sentinel"), "VERDICT", NONCE
    if kind == "markdown":
        return engine.load_pack("gap-review"), "engineer", None
    (folder / "pack.yaml").write_text(PACK, encoding="utf-8")
    (folder / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    block = {"json": "doc", "json many": "lines", "text": "prose"}[kind]
    return engine.load_pack(folder), block, None


def output(kind: str, size: int) -> tuple[str, dict[str, Any]]:
    """An output of ``kind`` of about ``size`` characters, and the evaluate keywords."""
    if kind == "sentinel":
        verdict = (
            f"<<<VERDICT:V1:{CRITERION}:NONCE={NONCE}>>>\nANSWER=YES\n"
            'REASON="Retries stop after two attempts."\n'
            f"<<<END_VERDICT:{CRITERION}:NONCE={NONCE}>>>\n"
        )
        prose = "Some prose before the block, as a model writes it.\n"
        return _repeat(prose, size, tail=verdict), {"vars": {"criterion": CRITERION}}
    if kind == "markdown":
        section = SECTION + "Because " * ((8 * 1024 - len(SECTION)) // 8) + "\n\n"
        context = {
            "known_gaps": ["GAP-FLOW-001"],
            "known_issues": [{"id": "ISSUE-R1-001", "severity": "LOW"}],
        }
        return _repeat(section, size, head=HEAD), {"context": context}
    item = json.dumps(ITEM)
    if kind == "json":
        return _repeat(item + ",\n", size, head='{"items": [\n', tail=item + "\n]}"), {}
    if kind == "json many":
        return _repeat(item + "\n", size), {}
    line = "A line of the answer, long enough to be a line.\n"
    return _repeat(line, size, head="Summary:\n"), {}


def child(kind: str, size: int) -> None:
    """Measure one evaluation; print its figures as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        pack, block, nonce = load(kind, Path(tmp))
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        text, arguments = output(kind, size)
        start = time.perf_counter()
        verdict = pack.evaluate(block, text, nonce, arguments.pop("vars", None), **arguments)
        took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "status": verdict.status,
                "failures": [f.message[:120] for f in verdict.failures],
                "seconds": took,
                "base_kb": base,
                "peak_kb": peak,
                "chars": len(text),
            }
        )
    )


def measure(kind: str, size: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, str(size)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{kind} at {size // MIB} MiB failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 and 8 MiB only")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "BYTES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    sizes = [1, 8] if args.quick else [1, 8, 64]
    rows: list[dict[str, Any]] = []
    if args.format == "text":
        print(f"# linear growth, {time.strftime('%Y-%m-%d')}, Python {platform.python_version()}")
        print(
            f"{'kind':<10} {'size':>7} {'status':>6} {'time s':>8} {'x time':>7} "
            f"{'peak MB':>8} {'base MB':>8} {'x (peak-base)':>13}"
        )
    for kind in KINDS:
        previous: dict[str, Any] | None = None
        for mib in sizes:
            figures = measure(kind, mib * MIB)
            row = {"kind": kind, "mib": mib, **figures}
            if previous is not None:
                row["time_ratio"] = figures["seconds"] / max(previous["seconds"], 1e-9)
                grown = figures["peak_kb"] - figures["base_kb"]
                before = max(previous["peak_kb"] - previous["base_kb"], 1)
                row["memory_ratio"] = grown / before
            rows.append(row)
            previous = figures
            if args.format == "text":
                time_ratio = f"{row['time_ratio']:.1f}" if "time_ratio" in row else "-"
                memory_ratio = f"{row['memory_ratio']:.1f}" if "memory_ratio" in row else "-"
                print(
                    f"{kind:<10} {str(mib) + ' MiB':>7} {figures['status']:>6} "
                    f"{figures['seconds']:>8.3f} {time_ratio:>7} "
                    f"{figures['peak_kb'] / 1024:>8.0f} {figures['base_kb'] / 1024:>8.0f} "
                    f"{memory_ratio:>13}",
                    flush=True,
                )
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
