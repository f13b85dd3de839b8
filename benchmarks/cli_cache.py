"""Benchmark of what a shell orchestrator pays per output: `rules eval`, `rules render` and
`rules gate` against `rules parse` of the same output, warm caches.

    python benchmarks/cli_cache.py [--repeat N] [--format text|json]

Each command runs as its own process, as a bash pipeline runs it, on a failing VERDICT of
the `sentinel` pack (`examples/sentinel/verdict_bad.txt`; the gate: `quality-gate`'s PLAN
stage on its example output), with a compiled-pack cache in a temporary folder
warmed by one run of each command first, and Python's bytecode cache on (as an installed
engine has it; `PYTHONDONTWRITEBYTECODE` is dropped). The commands run interleaved,
``--repeat`` times each; it prints each command's median wall and CPU time and their ratio to
`rules parse` (from its cache) measured in the same run. `parse` starts from the pack's
grammars in the compiled-pack cache, `eval`, `render` and `gate` from the pack's image there
(engine.pack.image). It measures, it does not judge.

It also times `rules run` of a one-attempt loop around a trivial model command (`cat` of the
passing `examples/sentinel/verdict.txt`) against `rules eval` of that same output, as a ratio
in the same run. The fair reference is `rules eval --session` with a fresh session folder,
as the run has: both then open the pack from its image, create a session's ledger and record
one attempt, and what is left is the run's own work (the loop, the prompt, the child
process). Each timed call of either gets a session folder of its own, made before the clock
starts; the ratio to `rules eval` without --session (nothing recorded) is printed too.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RULES = [sys.executable, "-m", "engine"]
VERDICT = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
BAD = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")
GOOD = str(REPO / "examples" / "sentinel" / "verdict.txt")
SESSION = "{session}"
"""Stands for a fresh session folder in a command: each timed call gets its own."""
COMMANDS = {
    "parse": ["parse", *VERDICT, "--var", "criterion=AC1", BAD],
    "eval": ["eval", *VERDICT, "--var", "criterion=AC1", BAD],
    "render": ["render", *VERDICT, "--var", "criterion=AC1", BAD],
}
RUN_COMMANDS = {
    "eval ok": ["eval", *VERDICT, "--var", "criterion=AC1", GOOD],
    "eval ok session": ["eval", *VERDICT, "--var", "criterion=AC1", "--session", SESSION, GOOD],
    "run": ["run", *VERDICT, "--var", "criterion=AC1", "--session", SESSION, "--", "cat", GOOD],
}
"""`rules run` of a one-attempt loop and `rules eval` of the same output (the module's
docstring says which ratio is fair)."""


def gate_command() -> list[str] | None:
    """`rules gate` of the quality-gate pack's PLAN stage on its example output, if shipped."""
    example = REPO / "examples" / "quality-gate" / "todo.json"
    return (
        ["gate", "--pack", "quality-gate", "--stage", "PLAN", str(example)]
        if example.is_file()
        else None
    )


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``command``."""
    if SESSION in command:
        fresh = tempfile.mkdtemp(prefix="session-", dir=env["RULES_CACHE_DIR"])
        command = [fresh if word == SESSION else word for word in command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [*RULES, *command],
        env=env,
        cwd=env["RULES_CACHE_DIR"],  # whatever a command writes stays in the temporary folder
        capture_output=True,
        check=False,
        timeout=120,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1, 3):
        raise SystemExit(f"rules {' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def measure(
    runs: dict[tuple[str, str], tuple[list[str], dict[str, str]]], repeat: int
) -> dict[tuple[str, str], tuple[float, float]]:
    """Median wall and CPU time of each run; all of them interleaved, so that a change in
    the machine's load hits every command alike."""
    for command, env in runs.values():  # warm: the caches are written
        timed(command, env)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in runs}
    for _ in range(repeat):
        for key, (command, env) in runs.items():
            times[key].append(timed(command, env))
    return {
        key: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
        for key, got in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--format", choices=("text", "json"), default="text")
    options = parser.parse_args()
    commands = {**COMMANDS, **RUN_COMMANDS}
    gate = gate_command()
    if gate is not None:
        commands["gate"] = gate
    with tempfile.TemporaryDirectory() as cache:
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE",)}
        base["RULES_CACHE_DIR"] = cache
        base.pop("RULES_NO_CACHE", None)
        runs = {("rules", name): (command, base) for name, command in commands.items()}
        medians = measure(runs, options.repeat)
    wall, cpu = medians[("rules", "parse")]  # the reference: `rules parse` from its cache
    results = {
        f"{label} {name}": {
            "wall_s": round(w, 4),
            "wall_x_parse": round(w / wall, 2),
            "cpu_s": round(c, 4),
            "cpu_x_parse": round(c / cpu, 2),
        }
        for (label, name), (w, c) in medians.items()
    }
    run_wall, run_cpu = medians[("rules", "run")]
    session_wall, session_cpu = medians[("rules", "eval ok session")]
    eval_wall, eval_cpu = medians[("rules", "eval ok")]
    ratios = {
        "run_x_eval_session": round(run_wall / session_wall, 2),
        "run_x_eval": round(run_wall / eval_wall, 2),
        "run_x_eval_session_cpu": round(run_cpu / session_cpu, 2),
        "run_x_eval_cpu": round(run_cpu / eval_cpu, 2),
    }
    if options.format == "json":
        document = {"python": platform.python_version(), "results": results, "run": ratios}
        print(json.dumps(document, indent=2))
        return
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores, median of {options.repeat}")
    print(f"{'command':22} {'wall s':>7} {'x parse':>8} {'cpu s':>7} {'x parse':>8}")
    for key, row in results.items():
        print(
            f"{key:22} {row['wall_s']:7.3f} {row['wall_x_parse']:8.2f} "
            f"{row['cpu_s']:7.3f} {row['cpu_x_parse']:8.2f}"
        )
    print(
        f"rules run / rules eval --session: wall {ratios['run_x_eval_session']:.2f}, "
        f"cpu {ratios['run_x_eval_session_cpu']:.2f}; / rules eval: wall "
        f"{ratios['run_x_eval']:.2f}, cpu {ratios['run_x_eval_cpu']:.2f}"
    )


if __name__ == "__main__":
    main()
