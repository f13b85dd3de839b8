"""`rules prompt`: the gap-review engineer's next-round prompt starts with seed 001 §5's
CONFLICT RESOLUTIONS FROM PREVIOUS ROUND section, byte for byte what the seed's
build_engineer_prompt_with_decisions builds (transcribed below), then the base prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from conftest import FIXTURES, run_cli

FRAME = "═" * 79


def seed_prompt(resolutions: list[dict[str, str]], base_prompt: str) -> str:
    """Seed 001 §5, build_engineer_prompt_with_decisions, with its f-strings as written."""
    if not resolutions:
        return base_prompt
    decisions_section = f"""
{FRAME}
                    CONFLICT RESOLUTIONS FROM PREVIOUS ROUND
{FRAME}

The following conflicts were resolved by the user. You MUST honor these decisions.

"""
    for resolution in resolutions:
        decisions_section += f"""
### {resolution["issue_id"]}: {resolution["summary"]}

**User Decision:** Option {resolution["chosen_option"]} - {resolution["decision"]}
**Rationale:** {resolution["user_rationale"]}

**Your Action Required:**
{resolution["engineer_action"]}

---
"""
    decisions_section += f"""
{FRAME}

IMPORTANT: Do not re-argue decided conflicts. Honor the user's decision and
proceed with implementation based on the chosen option.

If you believe the decision creates new issues, note them as NEW gaps, not
as disagreement with the decided conflict.
"""
    return f"{decisions_section}\n\n{base_prompt}"


def decided(
    ref: str,
    round_number: int,
    option: str,
    summary: str,
    decision: str,
    rationale: str,
    action: str,
) -> dict[str, Any]:
    return {
        "id": ref,
        "round": round_number,
        "option": option,
        "summary": summary,
        "decision": decision,
        "rationale": rationale,
        "actions": {"engineer": action},
    }


RESOLUTIONS = [
    decided(
        "ISSUE-R4-007",
        6,
        "A",
        "Schema validation strictness",
        "Implement strict mode validation",
        "CRITICAL severity - cannot risk silent data loss",
        "Implement strict validation. Schema parser must reject unknown fields.\n"
        "This was a CRITICAL issue and the user chose the Reviewer's position.",
    ),
    decided(
        "ISSUE-R5-003",
        6,
        "C",
        "Retry timing mechanism",
        "Context-aware retry timing",
        "Both concerns valid",
        "Update retry implementation to note context-awareness.",
    ),
]


def prompt(
    tmp_path: Path, round_number: int, decisions: list[dict[str, Any]] | None, *extra: str
) -> Any:
    context: dict[str, Any] = {
        "known_gaps": ["GAP-FLOW-001", "GAP-COMM-004"],
        "round": round_number,
    }
    if decisions is not None:
        context["decided_conflicts"] = decisions
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text(yaml.safe_dump(context, allow_unicode=True), encoding="utf-8")
    return run_cli(
        "prompt", "--pack", "gap-review", "--block", "engineer", "--context", str(ctx), *extra
    )


def test_decisions_section_is_the_seeds(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    base = prompt(tmp_path, 7, None)
    assert base.exit_code == 0, base.output
    assert base.stdout.startswith("ROUND 7: ENGINEER\n")  # no section without decisions
    result = prompt(tmp_path, 7, RESOLUTIONS)
    assert result.exit_code == 0, result.output
    expected = seed_prompt(
        [
            {
                "issue_id": r["id"],
                "summary": r["summary"],
                "chosen_option": r["option"],
                "decision": r["decision"],
                "user_rationale": r["rationale"],
                "engineer_action": r["actions"]["engineer"],
            }
            for r in RESOLUTIONS
        ],
        base.stdout,
    )
    assert result.stdout == expected
    assert result.stdout == snapshot


def test_only_the_previous_rounds_decisions(tmp_path: Path) -> None:
    later = prompt(tmp_path, 8, RESOLUTIONS)
    assert later.exit_code == 0
    assert "CONFLICT RESOLUTIONS" not in later.stdout


@pytest.mark.heavy
def test_the_session_ledger_gives_the_decisions(tmp_path: Path) -> None:
    issues = [
        {
            "id": "ISSUE-R5-003",
            "severity": "HIGH",
            "summary": "Retry timing mechanism",
            "suggestion": "Backoff",
            "impact": "Overload",
            "gap": "GAP-FLOW-001",
        }
    ]
    ctx = tmp_path / "c6.yaml"
    ctx.write_text(
        yaml.safe_dump({"known_gaps": ["GAP-FLOW-001"], "round": 6, "known_issues": issues}),
        encoding="utf-8",
    )
    out = tmp_path / "out.md"
    out.write_text(
        "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n"
        + "Detail. " * 30
        + "\n\n### Trade-offs\n\nSome.\n\n## DISAGREE: ISSUE-R5-003\n\n**Reviewer Concern:**\n"
        "> q\n\n**Engineer Position:**\nNo.\n\n**Rationale:**\nBecause.\n",
        encoding="utf-8",
    )
    session = tmp_path / "session"
    assert (
        run_cli(
            "conflicts",
            "detect",
            "--pack",
            "gap-review",
            "--session",
            str(session),
            "--context",
            str(ctx),
            str(out),
        ).exit_code
        == 0
    )
    assert (
        run_cli(
            "conflicts",
            "resolve",
            "--session",
            str(session),
            "ISSUE-R5-003",
            "--option",
            "A",
            "--decision",
            "Use backoff",
            "--rationale",
            "Safer",
            "--action",
            "engineer=Implement backoff.",
        ).exit_code
        == 0
    )
    ctx7 = tmp_path / "c7.yaml"
    ctx7.write_text(yaml.safe_dump({"known_gaps": ["GAP-FLOW-001"], "round": 7}), encoding="utf-8")
    result = run_cli(
        "prompt",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--session",
        str(session),
        "--context",
        str(ctx7),
    )
    assert result.exit_code == 0, result.output
    assert (
        "### ISSUE-R5-003: Retry timing mechanism\n\n**User Decision:** Option A - Use "
        "backoff\n**Rationale:** Safer\n\n**Your Action Required:**\nImplement backoff.\n"
        in result.stdout
    )


def test_usage_errors(tmp_path: Path) -> None:
    pack = str(FIXTURES / "packs" / "json_text")
    unknown = run_cli("prompt", "--pack", pack, "--block", "task")
    assert unknown.exit_code == 2
    assert "declares no first prompt for block 'task'" in unknown.stderr
    missing = run_cli("prompt", "--pack", "gap-review", "--block", "nope")
    assert missing.exit_code == 2 and "nope" in missing.stderr


def test_the_example_fits_the_initial_budget(tmp_path: Path) -> None:
    import shutil

    from conftest import REPO

    full = prompt(tmp_path, 1, None)
    assert "EXAMPLE OF THE EXPECTED FORMAT (Default template):\n" in full.stdout
    copy = tmp_path / "gap-review"
    shutil.copytree(REPO / "rules" / "gap-review", copy)
    pack_file = copy / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8")
    old = "  budgets: {retry_tokens: 2000, chars_per_token: 4}\n"
    assert old in text
    pack_file.write_text(
        text.replace(
            old, "  budgets: {retry_tokens: 2000, initial_tokens: 40, chars_per_token: 4}\n"
        ),
        encoding="utf-8",
    )
    ctx = tmp_path / "ctx.yaml"
    small = run_cli("prompt", "--pack", str(copy), "--block", "engineer", "--context", str(ctx))
    assert small.exit_code == 0, small.output
    example = small.stdout.split("EXAMPLE OF THE EXPECTED FORMAT (Default template):\n")[1]
    assert len(example) < len(full.stdout.split("(Default template):\n")[1])
    assert len(example) <= 160 + 200  # 40 tokens x 4 chars, plus the truncation notice
