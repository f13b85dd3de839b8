"""Done means (issue 25): one scripted session through the CLI (sentinel repairs, gap-review
rounds with a rate limit, a conflict resolved, a user choice, a quality gate) gives the
same decisions, prompts and `rules log` views on a SQLite session folder and in a
PostgreSQL ledger."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from pg_server import PostgresServer

from conftest import REPO, run_cli

HERE = Path(__file__).parent
FAKE_MODEL = str(REPO / "examples" / "fake_model.py")
SESSION = "job"


def _module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RATES = _module("rate_limit_helpers", HERE / "policy" / "test_rate_limits.py")
CONFLICTS = _module("conflict_helpers", HERE / "policy" / "test_conflicts.py")
CHOICES = _module("choice_helpers", HERE / "policy" / "test_choices.py")


def write(name: str, content: Any) -> str:
    text = content if isinstance(content, str) else yaml.safe_dump(content)
    Path(name).write_text(text, encoding="utf-8")
    return name


def scripted_session(ledger: list[str]) -> list[tuple[str, int, str, str]]:
    """Run the script in the current folder, the session's ledger chosen by ``ledger``
    (nothing: the folder's own); every step's (command, exit status, stdout, stderr)."""
    steps: list[tuple[str, int, str, str]] = []

    def rules(*args: str) -> str:
        end = args.index("--") if "--" in args else len(args)
        done = run_cli(*args[:end], "--session", SESSION, *ledger, *args[end:])
        steps.append((" ".join(args), done.exit_code, done.stdout, done.stderr))
        return done.stdout

    # sentinel: a repair, then (the same item's run, continued) the cap
    sentinel = ("--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")
    sentinel += ("--prompt", str(REPO / "examples" / "sentinel" / "task.md"))
    for more in ((), ("--continue",)):
        rules("run", *sentinel, *more, "--var", "criterion=AC1", "--", sys.executable, FAKE_MODEL)
    # gap-review rounds: the DISAGREE window over rounds (a rate limit), and the prompt
    for number, disagree in ((1, [1, 2]), (2, [1, 2, 3]), (3, [1, 2, 3, 4])):
        severities = ["HIGH"] * 5
        context = {
            "known_gaps": ["GAP-FLOW-006"],
            "round": number,
            "known_issues": RATES.issues_of(number, severities),
        }
        ctx = write(f"round{number}.yaml", context)
        out = write(f"round{number}.md", RATES.output_for(number, disagree, len(severities)))
        gap = ("--pack", "gap-review", "--block", "engineer", "--context", ctx)
        rules("eval", *gap, "--format", "json", out)
        rules("render", *gap, out)
    # a conflict detected, resolved, and the decisions in the next round's prompt
    ctx6 = write("round6.yaml", {"known_gaps": ["GAP-FLOW-001"], "round": 6,
                                 "known_issues": CONFLICTS.CASES[0]["issues"]})  # fmt: skip
    out6 = write("round6.md", CONFLICTS.HEADER + CONFLICTS.EXAMPLE_1_SECTION)
    rules("conflicts", "detect", "--pack", "gap-review", "--context", ctx6, out6)
    rules("conflicts", "resolve", "ISSUE-R5-003", "--option", "A", "--decision", "Keep it.",
          "--rationale", "Fast enough.", "--now", "2026-01-12T15:30:00Z")  # fmt: skip
    ctx7 = write("round7.yaml", {"known_gaps": ["GAP-FLOW-001"], "round": 7,
                                 "original_prompt": "Write round 7."})  # fmt: skip
    rules("prompt", "--pack", "gap-review", "--block", "engineer", "--context", ctx7)
    # a user's choice after an escalation: one more retry with the user's text
    ctx4 = write("choice.yaml", {"known_gaps": ["GAP-FLOW-001"], "round": 4,
                                 "original_prompt": "Write round 4."})  # fmt: skip
    bad = write("bad.md", CHOICES.BAD)
    for _ in range(3):
        rules("eval", "--pack", "gap-review", "--block", "engineer", "--context", ctx4,
              "--format", "json", bad)  # fmt: skip
    rules("choose", "--context", ctx4, "engineer@4", "3", "--text", "See docs/flow.md")
    rules("eval", "--pack", "gap-review", "--block", "engineer", "--context", ctx4,
          "--format", "json", write("good.md", CHOICES.GOOD))  # fmt: skip
    # a quality gate that fails, then passes
    failing = write("gate.json", json.dumps({"status": "pending"}))
    gate = ("gate", "--pack", "quality-gate", "--stage", "IMPLEMENT")
    rules(*gate, "--now", "2026-01-04T06:30:00Z", "--format", "json", failing)
    # the views of the whole session
    rules("log")
    rules("log", "--format", "json")
    rules("log", "--format", "jsonl")
    rules("log", "--view", "rounds", "--pack", "gap-review")
    rules("log", "--view", "decisions")
    rules("log", "--format", "jsonl", "--view", "failures")
    return steps


@pytest.mark.heavy
def test_a_sqlite_folder_and_a_postgresql_ledger_give_the_same_session(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # the same clock on both
    transcripts = []
    for name, ledger in (("sqlite", []), ("postgresql", ["--ledger", ""])):
        folder = tmp_path / name
        folder.mkdir()
        monkeypatch.chdir(folder)
        if ledger:
            ledger[1] = postgres_server.create_database()
        transcripts.append(scripted_session(ledger))
        assert Path(SESSION).is_dir() == (name == "sqlite")  # a server session has no folder
    on_sqlite, on_postgresql = transcripts
    assert [s[:2] for s in on_sqlite] == [s[:2] for s in on_postgresql]
    for sqlite_step, postgresql_step in zip(on_sqlite, on_postgresql, strict=True):
        assert sqlite_step == postgresql_step, sqlite_step[0]
    # the script did what it says: repairs, a rate limit, a conflict, a choice, a gate
    codes = {command.split(" --")[0]: code for command, code, _, _ in on_sqlite}
    assert codes["choose"] == 0 and codes["conflicts resolve ISSUE-R5-003"] == 0
    text = "\n".join(out + err for _, _, out, err in on_sqlite)
    assert "attempt 2: pass -> PROCEED" in text and "NEEDS_HUMAN" in text
    assert '"limit"' in text and "ISSUE-R5-003" in text and "See docs/flow.md" in text
    assert '"gate_result"' in on_sqlite[-1][2]
