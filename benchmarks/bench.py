"""One-command benchmark of the rules engine, against a hand-written reference parser.

Run from a clone, with the interpreter the engine is installed in:

    python benchmarks/bench.py [--reference PATH] [--quick] [--format text|json]

It prints, with the date, the Python version and the machine's core count:

1. parse: microseconds per parse of a small valid block of each kind, of a VERDICT at the
   end of a 4 KB output and at the end of 1 MB and 10 MB outputs, for this engine and the
   reference, with the ratio ref_time / our_time (> 1.0: we are faster) and the ratio of
   each to the *practical limit* (``str.find`` for the opener and the closer plus splitting
   only the payload into lines). One process, ours / reference / limit interleaved in
   rounds, medians.
2. ``rules parse --jsonl``: 10,000 VERDICT records in one process against a Python loop
   over the reference (json decoding and encoding of every record included).
3. pipeline latency in-process: a failing 4 KB VERDICT through evaluate + decide + render,
   and the gap-review retry prompt of a failing engineer output (median, p99).
4. command-line start-up: cold processes of the same interpreter, runs interleaved,
   medians; and how many modules the commands import.
5. peak memory of ``rules parse`` on a 100 MB output, in a child process.
6. the targets of issue 9 ("Done means"), PASS / FAIL / SKIP.

The reference is the parser of the deadfish-cli project (``.deadf/bin/parse-blocks.py``).
Nothing of it is stored in this repository: extract it yourself and pass its path,

    git clone https://github.com/Fredasterehub/deadfish-cli
    git -C deadfish-cli show 15700c2:.deadf/bin/parse-blocks.py > /tmp/parse-blocks.py
    python benchmarks/bench.py --reference /tmp/parse-blocks.py

or set ``RULES_BENCH_REFERENCE=/tmp/parse-blocks.py``. Without it, the reference columns
(and the targets that need them) are skipped. Every benchmark input is generated here and
checked first: both parsers must return the same JSON (or the same error for the failing
output), else the benchmark stops with exit status 1. Otherwise it exits 0: it measures,
it does not judge (the targets section only reports).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

import engine

REPO = Path(__file__).resolve().parent.parent
NONCE = "4F2C9A"
CRITERION = "AC1"
MB = 1_000_000
MIB = 1 << 20
JSONL_RECORDS = 10_000
MEMORY_INPUT_BYTES = 100 * MB
REFERENCE_ENV = "RULES_BENCH_REFERENCE"


class Disagreement(Exception):
    """The two parsers do not return the same result for a benchmark input (or ours does
    not return the expected one)."""


@dataclass(frozen=True)
class Settings:
    """How long to measure: the default run, or a quick smoke run."""

    batch_s: float  # aim of one timed batch of calls (section 1)
    rounds: int  # interleaved rounds per parse case (section 1)
    case_budget_s: float  # most time one parse case may take (big outputs)
    jsonl_rounds: int
    pipeline_samples: int
    pipeline_budget_s: float
    cli_runs: int
    memory_reference: bool  # also measure the reference CLI's peak memory

    @classmethod
    def for_mode(cls, quick: bool) -> Settings:
        if quick:
            return cls(
                batch_s=0.002,
                rounds=5,
                case_budget_s=0.6,
                jsonl_rounds=1,
                pipeline_samples=100,
                pipeline_budget_s=0.6,
                cli_runs=3,
                memory_reference=False,
            )
        return cls(
            batch_s=0.01,
            rounds=31,
            case_budget_s=6.0,
            jsonl_rounds=3,
            pipeline_samples=1000,
            pipeline_budget_s=6.0,
            cli_runs=10,
            memory_reference=True,
        )


# ----------------------------------------------------------------------------- inputs


def opener_closer(block: str, criterion: str | None = None) -> tuple[str, str]:
    """The delimiter lines of ``block`` for NONCE (and ``criterion`` for VERDICT)."""
    if criterion is not None:
        return (
            f"<<<{block}:V1:{criterion}:NONCE={NONCE}>>>",
            f"<<<END_{block}:{criterion}:NONCE={NONCE}>>>",
        )
    return f"<<<{block}:V1:NONCE={NONCE}>>>", f"<<<END_{block}:NONCE={NONCE}>>>"


def wrap(block: str, payload: Sequence[str], criterion: str | None = None) -> str:
    opener, closer = opener_closer(block, criterion)
    return "\n".join([opener, *payload, closer])


def verdict(reason: str, answer: str = "YES", criterion: str = CRITERION) -> str:
    return wrap("VERDICT", [f"ANSWER={answer}", f'REASON="{reason}"'], criterion)


SMALL_BLOCKS: dict[str, str] = {
    "PLAN": wrap(
        "PLAN",
        [
            "TASK_ID=pack_cache",
            'TITLE="Cache compiled rulepacks"',
            "SUMMARY=",
            "  Keep compiled packs in the user cache folder.",
            "FILES:",
            '- path=engine/cache.py action=add rationale="New cache module"',
            '- path=engine/pack.py action=modify rationale="Use the cache"',
            "ACCEPTANCE:",
            '- id=AC1 text="A second load reads the cache"',
            '- id=AC2 text="An edit rebuilds it"',
            "ESTIMATED_DIFF=140",
        ],
    ),
    "TRACK": wrap(
        "TRACK",
        [
            "TRACK_ID=startup_speed",
            'NAME="Faster command start-up"',
            "PHASE=perf",
            'GOAL="Import only what each command needs"',
            "REQUIREMENTS=lazy_imports,pack_cache,bench",
            "ESTIMATED_TASKS=4",
            "PHASE_COMPLETE=false",
            "PHASE_BLOCKED=false",
            'REASONS="Nothing blocks this track"',
        ],
    ),
    "SPEC": wrap(
        "SPEC",
        [
            "TRACK_ID=startup_speed",
            'TITLE="Lazy command imports"',
            "SCOPE=",
            "  Every command imports only the modules it uses.",
            "APPROACH=",
            "  Move heavy imports into the functions that need them.",
            "  Measure with python -X importtime.",
            "CONSTRAINTS=",
            "  Keep the public API unchanged.",
            "SUCCESS_CRITERIA:",
            '- id=SC1 text="rules --version imports no jinja2"',
            '- id=SC2 text="rules parse imports no jsonschema"',
            "DEPENDENCIES:",
            '- "The compiled-pack cache"',
            "ESTIMATED_TASKS=3",
        ],
    ),
    "VERDICT": verdict("Retries stop after two attempts and both are logged."),
    "REFLECT": wrap(
        "REFLECT",
        [
            "UPDATES:",
            '- doc=PATTERNS action=append section="Start-up" content="Import heavy modules lazily"',
            '- doc=PITFALLS action=append section="Caching" content="Key caches by content hash"',
            "SCRATCH=",
            "  measured with the benchmark",
        ],
    ),
    "QA_REVIEW": wrap(
        "QA_REVIEW",
        [
            "VERDICT=FAIL",
            "RISK=MEDIUM",
            "C0=PASS",
            "C1=PASS",
            "C2=FAIL",
            "C3=PASS",
            "C4=PASS",
            "C5=PASS",
            "FINDINGS_COUNT=1",
            "FINDINGS:",
            '- severity=MAJOR category=C2 file="engine/cache.py" '
            'issue="Cache key ignores the engine version"',
            "REMEDIATION_COUNT=1",
            "REMEDIATION:",
            '- file="engine/cache.py" action="Add the engine version to the key"',
            'NOTES="One fix needed before merge"',
        ],
    ),
}

_PROSE_WORDS = (
    "the",
    "model",
    "checked",
    "each",
    "criterion",
    "against",
    "the",
    "tests",
    "and",
    "found",
    "the",
    "results",
    "consistent",
    "with",
    "its",
    "plan",
)


def prose(size: int) -> str:
    """About ``size`` characters of plain lines (no delimiter), ending with a newline."""
    lines = []
    for i in range(64):
        words = " ".join(_PROSE_WORDS[(i * 5 + k) % len(_PROSE_WORDS)] for k in range(10))
        lines.append(f"Step {i + 1}: {words}.\n")
    chunk = "".join(lines)
    text = chunk * (size // len(chunk) + 1)
    cut = text.rfind("\n", 0, max(size, 1))
    return text[: cut + 1] if cut >= 0 else ""


def after_prose(block_text: str, total: int) -> str:
    """``block_text`` at the end of an output of about ``total`` characters."""
    return prose(total - len(block_text) - 1) + block_text


@dataclass(frozen=True)
class Case:
    """One parse input: a block of a kind, alone or at the end of an output."""

    name: str
    block: str
    text: str
    criterion: str | None = None

    @property
    def command(self) -> str:
        """The reference's sub-command for this block."""
        return self.block.lower().replace("_", "-")

    @property
    def vars(self) -> dict[str, str]:
        return {"criterion": self.criterion} if self.criterion else {}


def parse_cases() -> list[Case]:
    cases = [
        Case(block, block, text, CRITERION if block == "VERDICT" else None)
        for block, text in SMALL_BLOCKS.items()
    ]
    small = SMALL_BLOCKS["VERDICT"]
    for label, size in (("4 KB", 4096), ("1 MB", MB), ("10 MB", 10 * MB)):
        cases.append(Case(f"VERDICT in {label}", "VERDICT", after_prose(small, size), CRITERION))
    return cases


def failing_verdict_4k() -> str:
    """A 4 KB output whose VERDICT quotes ANSWER (a PARSE_ERROR the pack repairs)."""
    return after_prose(verdict("The tests pass on CI.").replace("ANSWER=YES", 'ANSWER="YES"'), 4096)


def engineer_output(gaps: Sequence[str], headed: bool = True) -> str:
    """An engineer's gap proposals; ``headed=False`` drops the required headers."""
    parts = []
    for gap in gaps:
        head = f"## Gap Resolution: {gap}" if headed else f"# About {gap}"
        parts.append(
            f"{head}\n\n**Confidence:** MEDIUM\n\n### Proposed Solution\n"
            f"Route every failure of {gap} through the repair loop and record it.\n"
            + "The ledger keeps one row per attempt so the cap holds across calls.\n"
            * 6
            + "\n### Examples\n```yaml\ntriggers:\n  answer: {max_attempts: 2}\n```\n\n"
            "### Trade-offs\n**Pros:**\n- One place decides\n\n**Cons:**\n- One more table\n"
            "\n### New Gaps Introduced\n- None\n"
        )
    return "\n".join(parts)


GAP_REVIEW_OUTPUTS: dict[str, str] = {
    "INCONSISTENT_REFS": engineer_output(["GAP-FLOW-001", "GAP-FLOW-404"]),
    "WRONG_FORMAT": engineer_output(["GAP-FLOW-001", "GAP-FLOW-002"], headed=False),
}


def gap_review_context() -> dict[str, Any]:
    context: dict[str, Any] = yaml.safe_load(
        (REPO / "examples" / "gap-review" / "ctx-003.yaml").read_text(encoding="utf-8")
    )
    context["original_prompt"] = (
        "You are the Engineer. Write round 3's gap proposals to round_003/engineer.md."
    )
    return context


# ----------------------------------------------------------------------------- parsers


class Reference:
    """The reference parser, loaded from a file at run time."""

    def __init__(self, path: Path) -> None:
        spec = importlib.util.spec_from_file_location("rules_bench_reference", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"bench: cannot load the reference parser {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
        self.path = path
        self.module: ModuleType = module

    def parse(self, command: str, text: str, criterion: str | None) -> dict[str, Any]:
        """One parse the way its command line does it; raises on a failure."""
        ref = self.module
        result: dict[str, Any] = ref.extract_block(
            text, NONCE, ref.build_config(command, criterion)
        )
        return result

    def outcome(self, command: str, text: str, criterion: str | None) -> tuple[bool, Any]:
        """(True, data) or (False, error message)."""
        try:
            return True, self.parse(command, text, criterion)
        except Exception as error:  # its ParseError, NonceMismatch, ValueError
            return False, str(error)


def ours_outcome(pack: engine.Pack, case: Case) -> tuple[bool, Any]:
    result = pack.parse(case.block, case.text, nonce=NONCE, vars=case.vars)
    if result.ok:
        return True, result.data
    return False, result.failure.message if result.failure else None


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def check_agreement(
    pack: engine.Pack, reference: Reference | None, cases: Sequence[Case], expect_ok: bool = True
) -> None:
    """Both parsers give the same JSON (or the same error) for each case; ours gives the
    expected outcome even without the reference."""
    for case in cases:
        ours = ours_outcome(pack, case)
        if ours[0] != expect_ok:
            raise Disagreement(
                f"{case.name}: our parser says {ours!r}, expected "
                f"{'success' if expect_ok else 'a failure'}"
            )
        if reference is None:
            continue
        theirs = reference.outcome(case.command, case.text, case.criterion)
        if canonical(ours) != canonical(theirs):
            raise Disagreement(
                f"{case.name}: parsers disagree\n  ours:      "
                f"{canonical(ours)[:400]}\n  reference: "
                f"{canonical(theirs)[:400]}"
            )


def our_call(pack: engine.Pack, case: Case) -> Callable[[], object]:
    """One parse of ``case`` by this engine, through the public API."""
    block, text, params = case.block, case.text, case.vars

    def parse() -> object:
        return pack.parse(block, text, nonce=NONCE, vars=params)

    return parse


def reference_call(reference: Reference, case: Case) -> Callable[[], object]:
    """One parse of ``case`` by the reference, as its command line does it (a failure is
    caught, as a caller must)."""
    command, text, criterion = case.command, case.text, case.criterion

    def parse() -> object:
        return reference.outcome(command, text, criterion)

    return parse


def practical_limit(case: Case) -> Callable[[], object]:
    """``str.find`` for the opener and the closer plus splitting only the payload."""
    opener, closer = opener_closer(case.block, case.criterion)
    text, skip = case.text, len(opener) + 1

    def limit() -> object:
        start = text.find(opener)
        end = text.find(closer, start)
        return text[start + skip : end - 1].split("\n")

    return limit


# ----------------------------------------------------------------------------- timing


def per_call(action: Callable[[], object], calls: int) -> float:
    """Seconds per call of ``action`` over ``calls`` calls."""
    clock = time.perf_counter
    start = clock()
    for _ in range(calls):
        action()
    return (clock() - start) / calls


def calls_for(action: Callable[[], object], aim_s: float) -> int:
    """How many calls make a batch of about ``aim_s`` seconds."""
    one = per_call(action, 1)
    if one < aim_s / 20:
        one = per_call(action, max(1, int(aim_s / 20 / max(one, 1e-9))))
    return max(1, round(aim_s / max(one, 1e-9)))


def interleaved(
    actions: Mapping[str, Callable[[], object]], settings: Settings
) -> dict[str, float]:
    """Median seconds per call of each action, measured in rounds that alternate them."""
    calls = {name: calls_for(action, settings.batch_s) for name, action in actions.items()}
    one_round = sum(per_call(action, calls[name]) * calls[name] for name, action in actions.items())
    rounds = max(5, min(settings.rounds, int(settings.case_budget_s / max(one_round, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in actions}
    names = list(actions)
    for index in range(rounds):
        shift = index % len(names)  # rotate the order: nobody always goes first
        for name in names[shift:] + names[:shift]:
            samples[name].append(per_call(actions[name], calls[name]))
    return {name: statistics.median(values) for name, values in samples.items()}


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def us(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e6, 2)


def mib(size: int | None) -> float | None:
    return None if size is None else round(size / MIB, 1)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return round(numerator / denominator, 3)


# ----------------------------------------------------------------------------- 1. parse


def bench_parse(
    pack: engine.Pack, reference: Reference | None, cases: Sequence[Case], settings: Settings
) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        actions = {"ours": our_call(pack, case), "limit": practical_limit(case)}
        if reference is not None:
            actions["ref"] = reference_call(reference, case)
        medians = interleaved(actions, settings)
        ours, limit, ref = medians["ours"], medians["limit"], medians.get("ref")
        rows.append(
            {
                "case": case.name,
                "chars": len(case.text),
                "ours_us": us(ours),
                "ref_us": us(ref),
                "limit_us": us(limit),
                "ratio_ref_over_ours": ratio(ref, ours),
                "ours_x_limit": ratio(ours, limit),
                "ref_x_limit": ratio(ref, limit),
            }
        )
    return rows


# ----------------------------------------------------------------------------- 2. jsonl


def rules_command() -> list[str]:
    """The ``rules`` console script run by this interpreter (or ``-m engine``)."""
    script = Path(sys.executable).parent / "rules"
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "engine"]


def jsonl_records() -> list[dict[str, Any]]:
    records = []
    for i in range(JSONL_RECORDS):
        criterion = f"AC{i % 9 + 1}"
        text = verdict(
            f"Check {i} of the acceptance run passed on CI", "YES" if i % 3 else "NO", criterion
        )
        records.append(
            {
                "id": f"r{i}",
                "block": "VERDICT",
                "nonce": NONCE,
                "vars": {"criterion": criterion},
                "text": text,
            }
        )
    return records


def reference_jsonl(reference: Reference, source: Path, target: Path) -> None:
    """What a Python loop over the reference does for a JSONL file: decode each record,
    parse, encode the result the way ``rules parse --jsonl`` does."""
    with source.open("rb") as lines, target.open("w", encoding="utf-8") as out:
        for line in lines:
            record = json.loads(line)
            ok, value = reference.outcome(
                record["block"].lower().replace("_", "-"),
                record["text"],
                record["vars"].get("criterion"),
            )
            data = value if ok else None
            out.write(
                json.dumps(
                    {
                        "id": record["id"],
                        "ok": ok,
                        "data": data,
                        "error": None if ok else value,
                        "failure_type": None if ok else "PARSE_ERROR",
                        "warnings": (data or {}).get("warnings", []),
                    }
                )
                + "\n"
            )


def ours_jsonl_in_process(pack: engine.Pack, source: Path, target: Path) -> None:
    """The same loop over ``pack.parse`` (no process start-up)."""
    with source.open("rb") as lines, target.open("w", encoding="utf-8") as out:
        for line in lines:
            record = json.loads(line)
            result = pack.parse(
                record["block"], record["text"], nonce=record["nonce"], vars=record["vars"]
            )
            out.write(
                json.dumps(
                    {
                        "id": record["id"],
                        "ok": result.ok,
                        "data": result.data,
                        "error": result.failure.message if result.failure else None,
                        "failure_type": result.failure.type if result.failure else None,
                        "warnings": list(result.warnings),
                    }
                )
                + "\n"
            )


def compare_jsonl(ours: Path, theirs: Path) -> None:
    our_lines = ours.read_text(encoding="utf-8").splitlines()
    their_lines = theirs.read_text(encoding="utf-8").splitlines()
    if len(our_lines) != len(their_lines):
        raise Disagreement(
            f"--jsonl: {len(our_lines)} result lines, the reference loop {len(their_lines)}"
        )
    for mine, other in zip(our_lines, their_lines, strict=True):
        a, b = json.loads(mine), json.loads(other)
        if (a["id"], a["ok"], a["data"]) != (b["id"], b["ok"], b["data"]):
            raise Disagreement(
                f"--jsonl record {a['id']}: ours {mine[:300]} / reference {other[:300]}"
            )


def bench_jsonl(
    pack: engine.Pack, reference: Reference | None, settings: Settings, tmp: Path
) -> dict[str, Any]:
    source = tmp / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in jsonl_records()), encoding="utf-8")
    command = [*rules_command(), "parse", "--pack", "sentinel", "--jsonl", str(source)]
    ours_out, ref_out, loop_out = tmp / "ours.jsonl", tmp / "ref.jsonl", tmp / "loop.jsonl"
    cli_times, ref_times, loop_times = [], [], []
    for _ in range(settings.jsonl_rounds):
        with ours_out.open("wb") as out:
            start = time.perf_counter()
            done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, check=False)
            cli_times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise Disagreement(
                f"`rules parse --jsonl` exited {done.returncode} on valid "
                f"records: {done.stderr.decode(errors='replace')[-500:]}"
            )
        if reference is not None:
            start = time.perf_counter()
            reference_jsonl(reference, source, ref_out)
            ref_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        ours_jsonl_in_process(pack, source, loop_out)
        loop_times.append(time.perf_counter() - start)
    compare_jsonl(ours_out, loop_out)
    if reference is not None:
        compare_jsonl(ours_out, ref_out)
    cli, loop = statistics.median(cli_times), statistics.median(loop_times)
    ref = statistics.median(ref_times) if ref_times else None
    per_s = {
        name: None if t is None else round(JSONL_RECORDS / t)
        for name, t in (("ours_cli", cli), ("ref_loop", ref), ("ours_loop", loop))
    }
    return {
        "records": JSONL_RECORDS,
        "runs": settings.jsonl_rounds,
        "ours_cli_s": round(cli, 4),
        "ref_loop_s": None if ref is None else round(ref, 4),
        "ours_loop_s": round(loop, 4),
        "ours_cli_per_s": per_s["ours_cli"],
        "ref_loop_per_s": per_s["ref_loop"],
        "ours_loop_per_s": per_s["ours_loop"],
        "ratio_ref_over_ours": ratio(ref, cli),
        "ratio_loop_ref_over_ours": ratio(ref, loop),
    }


# ----------------------------------------------------------------------------- 3. pipeline


@dataclass
class Latency:
    """Per-sample seconds of each part of a pipeline and of the whole."""

    parts: dict[str, list[float]] = field(default_factory=dict)
    total: list[float] = field(default_factory=list)
    first_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "samples": len(self.total),
            "first_call_us": us(self.first_s),
            "median_us": us(statistics.median(self.total)),
            "p99_us": us(percentile(self.total, 0.99)),
        }
        for name, values in self.parts.items():
            out[f"{name}_median_us"] = us(statistics.median(values))
            out[f"{name}_p99_us"] = us(percentile(values, 0.99))
        return out


def run_pipeline(
    steps: Sequence[tuple[str, Callable[[Any], Any]]],
    settings: Settings,
    alongside: Callable[[], object] | None = None,
) -> tuple[Latency, list[float]]:
    """Time ``steps`` (each gets the previous result) once as a first call, then as
    samples; ``alongside`` (the reference parse) is timed in the same loop."""
    latency = Latency(parts={name: [] for name, _ in steps})
    extra: list[float] = []
    clock = time.perf_counter
    deadline = math.inf
    for index in range(settings.pipeline_samples + 1):  # the first call, then the samples
        if index > 100 and clock() > deadline:
            break
        value: Any = None
        begin = clock()
        mark = begin
        for name, step in steps:
            value = step(value)
            now = clock()
            if index:
                latency.parts[name].append(now - mark)
            mark = now
        if not index:
            latency.first_s = mark - begin
            deadline = clock() + settings.pipeline_budget_s
            continue
        latency.total.append(mark - begin)
        if alongside is not None:
            start = clock()
            alongside()
            extra.append(clock() - start)
    return latency, extra


def bench_pipeline(
    pack: engine.Pack, reference: Reference | None, settings: Settings
) -> dict[str, Any]:
    text = failing_verdict_4k()
    params = {"criterion": CRITERION}
    case = Case("failing VERDICT in 4 KB", "VERDICT", text, CRITERION)
    check_agreement(pack, reference, [case], expect_ok=False)
    state: dict[str, Any] = {}

    def evaluate(_: Any) -> Any:
        state["verdict"] = pack.evaluate("VERDICT", text, NONCE, params)
        return state["verdict"]

    def decide(verdict_: Any) -> Any:
        state["decision"] = pack.decide(verdict_, output=text, attempt=1, nonce=NONCE)
        return state["decision"]

    def render(decision: Any) -> Any:
        return pack.render(state["verdict"], decision, output=text, nonce=NONCE, vars=params)

    alongside = None if reference is None else reference_call(reference, case)
    latency, ref_times = run_pipeline(
        [("evaluate", evaluate), ("decide", decide), ("render", render)], settings, alongside
    )
    if state["decision"].action != "REPAIR":
        raise Disagreement(
            f"the failing 4 KB VERDICT was decided {state['decision'].action}, expected REPAIR"
        )
    summary = latency.summary()
    ref_median = statistics.median(ref_times) if ref_times else None
    summary.update(
        {
            "chars": len(text),
            "action": state["decision"].action,
            "ref_parse_us": us(ref_median),
            "x_ref_parse": ratio(statistics.median(latency.total), ref_median),
        }
    )
    return summary


def bench_gap_review(settings: Settings) -> dict[str, Any]:
    pack = engine.load_pack("gap-review")
    context = gap_review_context()
    results: dict[str, Any] = {}
    for expected, text in GAP_REVIEW_OUTPUTS.items():
        state: dict[str, Any] = {}

        def evaluate(_: Any, text: str = text, state: dict[str, Any] = state) -> Any:
            state["verdict"] = pack.evaluate("engineer", text, context=context)
            return state["verdict"]

        def decide(verdict_: Any, text: str = text, state: dict[str, Any] = state) -> Any:
            state["decision"] = pack.decide(verdict_, output=text, attempt=1, context=context)
            return state["decision"]

        def render(decision: Any, text: str = text, state: dict[str, Any] = state) -> Any:
            state["prompt"] = pack.render(state["verdict"], decision, output=text, context=context)
            return state["prompt"]

        latency, _ = run_pipeline(
            [("evaluate", evaluate), ("decide", decide), ("render", render)], settings
        )
        got = state["verdict"].failure_type
        if got != expected or state["decision"].action != "RETRY":
            raise Disagreement(
                f"gap-review input meant as {expected} gave {got} -> {state['decision'].action}"
            )
        results[expected] = {
            **latency.summary(),
            "chars": len(text),
            "prompt_chars": len(state["prompt"]),
        }
    return results


# ----------------------------------------------------------------------------- 4. start-up


def run_timed(
    command: Sequence[str], stdin: Path | None = None, cwd: Path | None = None
) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    with open(stdin or os.devnull, "rb") as source:
        start = time.perf_counter()
        done = subprocess.run(command, stdin=source, capture_output=True, cwd=cwd, check=False)
        return time.perf_counter() - start, done


_IMPORT_LINE = re.compile(r"^import time:\s+\d+\s*\|\s*\d+\s*\|(\s*)(\S+)", re.MULTILINE)
HEAVY = ("pydantic", "jsonschema", "jinja2", "yaml", "re2", "click")


def imported_modules(command: Sequence[str], stdin: Path | None = None) -> dict[str, Any]:
    """Modules whose import ran in a process of ``command`` (``python -X importtime``: one
    line per module imported, the interpreter's own start-up modules included)."""
    with open(stdin or os.devnull, "rb") as source:
        done = subprocess.run(
            [command[0], "-X", "importtime", *command[1:]],
            stdin=source,
            capture_output=True,
            check=False,
        )
    names = [m.group(2) for m in _IMPORT_LINE.finditer(done.stderr.decode("utf-8", "replace"))]
    tops = {name.split(".")[0] for name in names}
    return {"modules": len(names), "heavy": [h for h in HEAVY if h in tops]}


def bench_cli(reference: Reference | None, settings: Settings, tmp: Path) -> dict[str, Any]:
    block = tmp / "verdict.txt"
    block.write_text(SMALL_BLOCKS["VERDICT"] + "\n", encoding="utf-8")
    rules = rules_command()
    parse_args = [
        "parse",
        "--pack",
        "sentinel",
        "--block",
        "VERDICT",
        "--nonce",
        NONCE,
        "--var",
        f"criterion={CRITERION}",
        str(block),
    ]
    commands: dict[str, tuple[list[str], Path | None]] = {
        "python_pass": ([sys.executable, "-c", "pass"], None),
        "import_click": ([sys.executable, "-c", "import click"], None),
        "rules_version": ([*rules, "--version"], None),
        "rules_parse": ([*rules, *parse_args], None),
        "rules_check": ([*rules, "check", str(REPO / "rules")], None),
    }
    if reference is not None:
        commands["ref_parse"] = (
            [
                sys.executable,
                str(reference.path),
                "verdict",
                "--nonce",
                NONCE,
                "--criterion",
                CRITERION,
            ],
            block,
        )
    # one unmeasured run each (writes byte-code caches), and checks of what they print
    outputs = {name: run_timed(cmd, stdin, REPO)[1] for name, (cmd, stdin) in commands.items()}
    notes = [
        f"{name} exited {done.returncode}: {done.stderr.decode()[-300:].strip()}"
        for name, done in outputs.items()
        if done.returncode != 0
    ]
    ours = json.loads(outputs["rules_parse"].stdout or b"null")
    if reference is not None and ours != json.loads(outputs["ref_parse"].stdout or b"null"):
        raise Disagreement(
            f"command lines disagree: ours {outputs['rules_parse'].stdout!r}"
            f" / reference {outputs['ref_parse'].stdout!r}"
        )
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(settings.cli_runs):
        for name, (cmd, stdin) in commands.items():
            samples[name].append(run_timed(cmd, stdin, REPO)[0])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    ref = medians.get("ref_parse")
    return {
        "runs": settings.cli_runs,
        "median_ms": {name: round(value * 1e3, 1) for name, value in medians.items()},
        "version_x_click": ratio(medians["rules_version"], medians["import_click"]),
        "parse_x_ref": ratio(medians["rules_parse"], ref),
        "check_s": round(medians["rules_check"], 3),
        "imports": {
            "python_pass": imported_modules([sys.executable, "-c", "pass"]),
            "import_click": imported_modules([sys.executable, "-c", "import click"]),
            "rules_version": imported_modules([*rules, "--version"]),
            "rules_parse": imported_modules([*rules, *parse_args]),
        },
        "notes": notes,
    }


# ----------------------------------------------------------------------------- 5. memory


# Linux gives a child the RSS high-water mark of the process it was forked from as the
# floor of its own ru_maxrss; forked from this benchmark (tens of MiB of test strings) a
# child would report at least that much. So a minimal interpreter (-I -S) forks the command,
# waits for it with wait4 and writes "child_maxrss_kib_or_bytes own_rss_bytes exit wall_s"
# (own RSS at the fork, the floor it passes on; -1 without /proc).
LAUNCHER = """
import os, sys, time
report, argv = sys.argv[1], sys.argv[2:]
try:
    with open("/proc/self/statm") as statm:
        own = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
except OSError:
    own = -1
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(report, "w") as out:
    out.write(f"{usage.ru_maxrss} {own} {os.waitstatus_to_exitcode(status)} {wall}")
"""


@dataclass(frozen=True)
class Peak:
    """Peak RSS (bytes) of one command, the launcher's RSS (its floor), exit, wall time."""

    rss: int
    floor: int | None
    exit_status: int
    wall_s: float


def peak_rss(command: Sequence[str], report: Path, stdin: Path | None = None) -> Peak | None:
    """The peak RSS of ``command`` alone, or None where fork/wait4 do not exist."""
    if not hasattr(os, "wait4") or not hasattr(os, "fork"):
        return None
    with open(stdin or os.devnull, "rb") as source:
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", LAUNCHER, str(report), *command],
            stdin=source,
            check=True,
        )
    rss, own, status, wall = report.read_text(encoding="utf-8").split()
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, else KiB
    return Peak(int(rss) * scale, int(own) if int(own) >= 0 else None, int(status), float(wall))


def write_big_output(path: Path, size: int) -> int:
    """Prose lines then a VERDICT, ``size`` bytes in all; returns the size written."""
    tail = SMALL_BLOCKS["VERDICT"] + "\n"
    chunk = prose(MB).encode()
    body = size - len(tail)
    with path.open("wb") as out:
        for _ in range(body // len(chunk)):
            out.write(chunk)
        out.write(prose(body % len(chunk)).encode())
        out.write(tail.encode())
    return path.stat().st_size


def bench_memory(reference: Reference | None, settings: Settings, tmp: Path) -> dict[str, Any]:
    big, tiny, report = tmp / "big.txt", tmp / "tiny.txt", tmp / "peak.txt"
    tiny.write_text(SMALL_BLOCKS["VERDICT"] + "\n", encoding="utf-8")
    size = write_big_output(big, MEMORY_INPUT_BYTES)
    ours = [
        *rules_command(),
        "parse",
        "--pack",
        "sentinel",
        "--block",
        "VERDICT",
        "--nonce",
        NONCE,
        "--var",
        f"criterion={CRITERION}",
    ]
    ref_peak = ref_base = None
    try:
        peak = peak_rss([*ours, str(big)], report)
        base = peak_rss([*ours, str(tiny)], report)
        if reference is not None and settings.memory_reference:
            theirs = [
                sys.executable,
                str(reference.path),
                "verdict",
                "--nonce",
                NONCE,
                "--criterion",
                CRITERION,
            ]
            ref_peak = peak_rss(theirs, report, big)
            ref_base = peak_rss(theirs, report, tiny)
    finally:
        big.unlink()
    if peak is None or base is None:
        return {
            "input_bytes": size,
            "input_mib": mib(size),
            "peak_mib": None,
            "peak_x_input": None,
            "note": "no fork/wait4 on this platform",
        }
    return {
        "input_bytes": size,
        "input_mib": mib(size),
        "exit_status": peak.exit_status,
        "wall_s": round(peak.wall_s, 2),
        "launcher_floor_mib": mib(peak.floor),
        "peak_mib": mib(peak.rss),
        "baseline_mib": mib(base.rss),
        "peak_x_input": ratio(peak.rss, size),
        "net_x_input": ratio(peak.rss - base.rss, size),
        "ref_peak_mib": mib(ref_peak.rss) if ref_peak else None,
        "ref_baseline_mib": mib(ref_base.rss) if ref_base else None,
        "ref_peak_x_input": ratio(ref_peak.rss, size) if ref_peak else None,
        "ref_net_x_input": ratio(ref_peak.rss - ref_base.rss, size)
        if ref_peak and ref_base
        else None,
    }


# ----------------------------------------------------------------------------- 6. targets


def targets(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The "Done means" of issue 9, each PASS, FAIL or SKIP (not measured)."""
    rows: list[tuple[str, float | None, str, float]] = []  # what, value, "<" or ">=", goal
    by_case = {row["case"]: row for row in results["parse"]}
    for name in (*SMALL_BLOCKS, "VERDICT in 4 KB"):
        rows.append(
            (f"parse {name}: ref time / our time", by_case[name]["ratio_ref_over_ours"], ">=", 1.0)
        )
    for name, today in (("VERDICT in 1 MB", 1.14), ("VERDICT in 10 MB", 1.32)):
        rows.append(
            (
                f"parse {name}: ref / ours (as fast as before)",
                by_case[name]["ratio_ref_over_ours"],
                ">=",
                today,
            )
        )
    rows.append(
        (
            "--jsonl 10,000 records: ref loop time / our CLI time",
            results["jsonl"]["ratio_ref_over_ours"],
            ">=",
            1.0,
        )
    )
    pipe = results["pipeline"]
    rows.append(("failing 4 KB VERDICT pipeline, median ms", pipe["median_us"] / 1e3, "<", 1.0))
    rows.append(("  the same, in reference parses of that output", pipe["x_ref_parse"], "<", 19.0))
    slowest = max(g["median_us"] for g in results["gap_review"].values())
    rows.append(("gap-review retry prompt, median ms (slowest case)", slowest / 1e3, "<", 2.0))
    cli = results["cli"]
    rows.append(
        ("`rules --version` / `python -c 'import click'`", cli["version_x_click"], "<", 1.5)
    )
    rows.append(("`rules parse` / the reference's command line", cli["parse_x_ref"], "<", 2.0))
    rows.append(
        ("peak RSS / input size, 100 MB output", results["memory"]["peak_x_input"], "<", 2.5)
    )
    rows.append(("`rules check rules/`, s", cli["check_s"], "<", 0.5))
    out = []
    for what, value, relation, goal in rows:
        if value is None:
            status = "SKIP"
        else:
            passed = value >= goal if relation == ">=" else value < goal
            status = "PASS" if passed else "FAIL"
        out.append(
            {
                "target": what,
                "measured": None if value is None else round(value, 3),
                "goal": f"{relation} {goal:g}",
                "status": status,
            }
        )
    return out


# ----------------------------------------------------------------------------- output


def fmt(value: Any, spec: str = ",.1f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def text_report(results: Mapping[str, Any]) -> str:
    meta, ref_given = results["meta"], results["meta"]["reference"] is not None
    out = [
        f"rules-engine {meta['engine_version']} benchmark, {meta['date']}",
        f"python {meta['python']} ({meta['implementation']}), {meta['cores']} cores "
        f"({meta['usable_cores']} usable), {meta['platform']}",
        f"mode: {meta['mode']}; reference: "
        + (
            meta["reference"]
            or "none, so its columns and the targets that need it are "
            f"skipped (give --reference PATH or {REFERENCE_ENV})"
        ),
        "",
        "1. parse (in-process, one process, ours / reference / limit interleaved "
        "in rounds, median us per parse, gc on)",
        "   ratio = ref time / our time (> 1.0: we are faster); x limit = time / practical "
        "limit (str.find for opener and closer + split of the payload into lines)",
    ]
    out.append(
        table(
            [
                "case",
                "chars",
                "ours us",
                "ref us",
                "ratio",
                "limit us",
                "ours x limit",
                "ref x limit",
            ],
            [
                [
                    r["case"],
                    f"{r['chars']:,}",
                    fmt(r["ours_us"], ",.2f"),
                    fmt(r["ref_us"], ",.2f"),
                    fmt(r["ratio_ref_over_ours"], ".2f"),
                    fmt(r["limit_us"], ",.2f"),
                    fmt(r["ours_x_limit"], ",.1f"),
                    fmt(r["ref_x_limit"], ",.1f"),
                ]
                for r in results["parse"]
            ],
        )
    )
    j = results["jsonl"]
    out += [
        "",
        f"2. --jsonl, {j['records']:,} VERDICT records (median of {j['runs']} run(s))",
        table(
            ["how", "seconds", "records/s", "ratio ref/this"],
            [
                [
                    "`rules parse --pack sentinel --jsonl FILE` (one process, start-up included)",
                    fmt(j["ours_cli_s"], ".3f"),
                    fmt(j["ours_cli_per_s"], ","),
                    fmt(j["ratio_ref_over_ours"], ".2f"),
                ],
                [
                    "Python loop over the reference (in-process, json in and out)",
                    fmt(j["ref_loop_s"], ".3f"),
                    fmt(j["ref_loop_per_s"], ","),
                    "1.00" if ref_given else "-",
                ],
                [
                    "(info) the same loop over pack.parse (in-process)",
                    fmt(j["ours_loop_s"], ".3f"),
                    fmt(j["ours_loop_per_s"], ","),
                    fmt(j["ratio_loop_ref_over_ours"], ".2f"),
                ],
            ],
        ),
    ]
    p = results["pipeline"]
    rows = [
        [
            "failing 4 KB VERDICT (ANSWER quoted) -> " + p["action"],
            fmt(p["median_us"]),
            fmt(p["p99_us"]),
            fmt(p["evaluate_median_us"]),
            fmt(p["decide_median_us"]),
            fmt(p["render_median_us"]),
            fmt(p["first_call_us"]),
        ]
    ]
    for name, g in results["gap_review"].items():
        rows.append(
            [
                f"gap-review engineer retry prompt ({name})",
                fmt(g["median_us"]),
                fmt(g["p99_us"]),
                fmt(g["evaluate_median_us"]),
                fmt(g["decide_median_us"]),
                fmt(g["render_median_us"]),
                fmt(g["first_call_us"]),
            ]
        )
    out += [
        "",
        f"3. pipeline latency, in-process, evaluate + decide + render "
        f"({p['samples']} samples after a first call)",
        table(
            ["output", "median us", "p99 us", "evaluate", "decide", "render", "first call"], rows
        ),
        f"   failing 4 KB VERDICT: the reference parses it in {fmt(p['ref_parse_us'])} us "
        f"(median); the pipeline takes {fmt(p['x_ref_parse'], '.1f')}x that"
        if ref_given
        else "   (reference skipped: no multiple of its parse time)",
    ]
    c = results["cli"]
    ms = c["median_ms"]
    rows = [
        ["python -c pass", fmt(ms["python_pass"]), ""],
        ["python -c 'import click'", fmt(ms["import_click"]), ""],
        [
            "rules --version",
            fmt(ms["rules_version"]),
            fmt(c["version_x_click"], ".2f") + "x import click",
        ],
        [
            "rules parse --block VERDICT FILE",
            fmt(ms["rules_parse"]),
            fmt(c["parse_x_ref"], ".2f") + "x the reference" if ref_given else "",
        ],
        ["python parse-blocks.py verdict < FILE", fmt(ms.get("ref_parse")), ""],
        ["rules check rules/", fmt(ms["rules_check"]), ""],
    ]
    out += [
        "",
        f"4. command-line start-up (cold processes, {sys.executable}, median of "
        f"{c['runs']} interleaved runs after one unmeasured run each)",
        table(["command", "median ms", "ratio"], rows),
        "   modules imported (lines of `python -X importtime`: every module imported in "
        "the process, the interpreter's own start-up included)",
        table(
            ["command", "modules", "heavy packages imported"],
            [
                [name, v["modules"], ", ".join(v["heavy"]) or "none"]
                for name, v in c["imports"].items()
            ],
        ),
    ]
    out += [f"   note: {n}" for n in c["notes"]]
    m = results["memory"]
    out += [
        "",
        f"5. peak memory of `rules parse` on a {m['input_mib']} MiB output "
        f"({m['input_bytes']:,} bytes: prose lines then a VERDICT), in a child process",
    ]
    if m["peak_mib"] is None:
        out.append(f"   not measured: {m['note']}")
    else:
        out += [
            table(
                ["command", "peak MiB", "tiny-file MiB", "peak / input", "(peak - tiny) / input"],
                [
                    [
                        "rules parse FILE",
                        fmt(m["peak_mib"]),
                        fmt(m["baseline_mib"]),
                        fmt(m["peak_x_input"], ".2f"),
                        fmt(m["net_x_input"], ".2f"),
                    ],
                    [
                        "parse-blocks.py verdict < FILE",
                        fmt(m["ref_peak_mib"]),
                        fmt(m["ref_baseline_mib"]),
                        fmt(m["ref_peak_x_input"], ".2f"),
                        fmt(m["ref_net_x_input"], ".2f"),
                    ],
                ],
            ),
            "   peak = ru_maxrss of the command's process from wait4 (whole process, nothing "
            "subtracted); peak / input = peak MiB / input MiB (the target);",
            "   tiny-file MiB = the same command on a "
            f"{len(SMALL_BLOCKS['VERDICT']) + 1}-byte VERDICT file; the RSS of the measuring "
            f"launcher ({fmt(m['launcher_floor_mib'])} MiB, a bare python -I -S) is a floor of "
            "every peak on Linux",
            f"   rules parse FILE exited {m['exit_status']} after {m['wall_s']} s",
        ]
    out += [
        "",
        "6. targets (issue 9, Done means)",
        table(
            ["target", "measured", "goal", "status"],
            [
                [t["target"], fmt(t["measured"], ",.3f"), t["goal"], t["status"]]
                for t in results["targets"]
            ],
        ),
    ]
    return "\n".join(out)


# ----------------------------------------------------------------------------- main


@contextmanager
def progress(label: str, quiet: bool) -> Iterator[None]:
    start = time.perf_counter()
    if not quiet:
        print(f"bench: {label} ...", file=sys.stderr, flush=True)
    yield
    if not quiet:
        print(
            f"bench: {label} done in {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
            flush=True,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--reference",
        type=Path,
        default=os.environ.get(REFERENCE_ENV),
        help=f"path to the reference parse-blocks.py (or {REFERENCE_ENV})",
    )
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (~15 s)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    settings = Settings.for_mode(args.quick)
    reference = Reference(Path(args.reference)) if args.reference else None
    results: dict[str, Any] = {
        "meta": {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "cores": os.cpu_count(),
            "usable_cores": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity")
            else os.cpu_count(),
            "platform": platform.platform(),
            "engine_version": engine.__version__,
            "mode": "quick" if args.quick else "default",
            "reference": None if reference is None else str(reference.path),
        }
    }
    pack = engine.load_pack("sentinel")
    cases = parse_cases()
    try:
        check_agreement(pack, reference, cases)
        with progress("parse", args.quiet):
            results["parse"] = bench_parse(pack, reference, cases, settings)
        with tempfile.TemporaryDirectory(prefix="rules-bench-") as folder:
            tmp = Path(folder)
            with progress("--jsonl", args.quiet):
                results["jsonl"] = bench_jsonl(pack, reference, settings, tmp)
            with progress("pipeline", args.quiet):
                results["pipeline"] = bench_pipeline(pack, reference, settings)
                results["gap_review"] = bench_gap_review(settings)
            with progress("command-line start-up", args.quiet):
                results["cli"] = bench_cli(reference, settings, tmp)
            with progress("peak memory", args.quiet):
                results["memory"] = bench_memory(reference, settings, tmp)
    except Disagreement as error:
        print(f"bench: ABORTED, no numbers: {error}", file=sys.stderr)
        return 1
    results["targets"] = targets(results)
    print(json.dumps(results, indent=2) if args.format == "json" else text_report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
