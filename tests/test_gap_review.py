"""The gap-review pack: two-tier validation of engineer and reviewer outputs (seed 003)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import engine
from conftest import FIXTURES, REPO, run_cli, shipped_pack

PACK = shipped_pack("gap-review")
SEEDS = {p.name[:3]: p for p in (FIXTURES / "seeds").glob("*.txt")}


def context_for(seed: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(
        (REPO / "examples" / "gap-review" / f"ctx-{seed}.yaml").read_text()
    )
    return data


@pytest.mark.parametrize("seed", ["000", "001", "003"])
def test_real_engineer_outputs_pass(seed: str) -> None:
    ctx = REPO / "examples" / "gap-review" / f"ctx-{seed}.yaml"
    result = run_cli(
        "eval",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(ctx),
        "--format",
        "json",
        str(SEEDS[seed]),
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"]["status"] == "pass"
    assert payload["decision"]["action"] == "PROCEED"
    assert payload["verdict"]["data"]["ids"]["gap"] == sorted(context_for(seed)["known_gaps"])


@pytest.mark.parametrize("seed", ["002", "004"])
def test_other_documents_are_wrong_format(seed: str) -> None:
    verdict = PACK.evaluate("engineer", SEEDS[seed].read_bytes(), context=context_for("003"))
    assert verdict.failure_type == "WRONG_FORMAT"
    assert verdict.error == "Missing required header: '## Gap Resolution:'"


GOOD = """## Gap Resolution: GAP-FLOW-001

**Confidence:** HIGH

### Proposed Solution
{body}

### Trade-offs
Some.
"""


def test_structure_runs_before_content() -> None:
    text = "## Gap Resolution: GAP-NOPE-001\n"  # bad ref, but no confidence marker
    verdict = PACK.evaluate("engineer", text, context={"known_gaps": []})
    assert verdict.failure_type == "WRONG_FORMAT"


def test_warnings_never_fail() -> None:
    thin = GOOD.format(body="Short.").replace("### Trade-offs\nSome.\n", "")
    verdict = PACK.evaluate("engineer", thin, context={"known_gaps": ["GAP-FLOW-001"]})
    assert verdict.status == "warn"
    assert verdict.warnings == [
        "Gap GAP-FLOW-001 section is thin (50 chars)",
        "Missing ### Trade-offs section (recommended)",
    ]
    full = GOOD.format(body="x" * 200)
    assert (
        PACK.evaluate("engineer", full, context={"known_gaps": ["GAP-FLOW-001"]}).status == "pass"
    )


@pytest.mark.parametrize(
    ("text", "failure"),
    [
        ("## Review: GAP-FLOW-001\nNO_ISSUES_FOUND\n", None),
        ("## Review: GAP-FLOW-001\n### High Priority\n- fix it\n", None),
        ("## Review: GAP-FLOW-001\nLooks fine.\n", "WRONG_FORMAT"),
        ("Looks fine. NO_ISSUES_FOUND\n", "WRONG_FORMAT"),
        ("## Review: GAP-FLOW-002\nNo Issues Found\n", "INCONSISTENT_REFS"),
    ],
)
def test_reviewer(text: str, failure: str | None) -> None:
    verdict = PACK.evaluate("reviewer", text, context={"known_gaps": ["GAP-FLOW-001"]})
    assert verdict.failure_type == failure


def test_retries_twice_then_escalates(tmp_path: Path) -> None:
    bad = tmp_path / "engineer.md"
    bad.write_text("# nothing useful\n")
    actions = []
    for attempt in (1, 2, 3):
        result = run_cli(
            "eval",
            "--pack",
            "gap-review",
            "--block",
            "engineer",
            "--attempt",
            str(attempt),
            "--var",
            "known_gaps=GAP-FLOW-001",
            str(bad),
        )
        actions.append((result.exit_code, result.stdout.split("action")[1].split()[0]))
    assert actions == [(3, "RETRY"), (3, "RETRY"), (1, "ESCALATE")]


def test_attempts_are_counted_per_round_in_a_session(tmp_path: Path) -> None:
    """gap-review declares `session.item: [round]`: round 2's first failure is attempt 1,
    however round 1 ended; and `rules render` after `rules eval` of the same output is the
    same attempt, not a second one."""
    bad = tmp_path / "engineer.md"
    bad.write_text("# nothing useful\n")

    def run(command: str, round_number: int) -> Any:
        ctx = tmp_path / f"ctx{round_number}.yaml"
        ctx.write_text(f"known_gaps: [GAP-FLOW-001]\nround: {round_number}\n")
        options = ["--pack", "gap-review", "--block", "engineer", "--context", str(ctx)]
        options += ["--session", str(tmp_path / "s")]
        if command == "eval":
            options += ["--format", "json"]
        return run_cli(command, *options, str(bad))

    def decision(round_number: int) -> tuple[str, int]:
        shown = json.loads(run("eval", round_number).stdout)["decision"]
        return shown["action"], shown["attempt"]

    first = decision(1)
    assert "RETRY ATTEMPT 2 of 3" in run("render", 1).stdout  # attempt 1's retry prompt
    assert [first, decision(1), decision(1)] == [("RETRY", 1), ("RETRY", 2), ("ESCALATE", 3)]
    assert decision(2) == ("RETRY", 1)
    log = json.loads(run_cli("log", "--session", str(tmp_path / "s"), "--format", "json").stdout)
    assert [row["attempt"] for row in log] == [1, 2, 3, 1]


def test_context_is_declared_and_typed() -> None:
    with pytest.raises(engine.EngineError, match="unknown context key 'known_gap'"):
        PACK.evaluate("engineer", "x", context={"known_gap": []})
    with pytest.raises(engine.EngineError, match="'round' must be an int"):
        PACK.evaluate("engineer", "x", context={"round": "3"})
    result = run_cli(
        "eval", "--pack", "gap-review", "--block", "engineer", "--var", "round=three", input="x"
    )
    assert result.exit_code == 2
    assert result.stderr == "error: context key 'round' must be an int, got 'three'\n"


def test_refs_need_the_known_list() -> None:
    with pytest.raises(engine.EngineError, match="context key 'known_gaps' is needed"):
        PACK.evaluate("engineer", GOOD.format(body="x"), context={})
