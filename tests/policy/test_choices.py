"""User choices with declared effects (`rules choose`, the pack's `menus:` and `rounds:`)
and the round errors table (`rules log --view rounds`), on gap-review (seed 003 §5, §6)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import run_cli

BAD = "# nothing useful here\n"
GOOD = (
    "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Proposed Solution\n"
    + "Validate in two tiers, structure first and content second, with examples. " * 4
    + "\n\n### Examples\nOne.\n\n### Trade-offs\nSome.\n\n### New Gaps Introduced\nNone\n"
)

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when slow
ISO = re.compile(r"^\| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \|")


class Round:
    def __init__(self, tmp_path: Path, number: int) -> None:
        self.session = str(tmp_path / "s")
        self.context = tmp_path / f"ctx{number}.yaml"
        self.context.write_text(
            f"known_gaps: [GAP-FLOW-001]\nround: {number}\noriginal_prompt: Write round {number}.\n"
        )
        self.tmp = tmp_path

    def eval(self, block: str, text: str) -> dict[str, object]:
        output = self.tmp / f"{block}.md"
        output.write_text(text)
        result = run_cli(
            "eval",
            "--pack",
            "gap-review",
            "--block",
            block,
            "--context",
            str(self.context),
            "--session",
            self.session,
            "--format",
            "json",
            str(output),
        )
        decision: dict[str, object] = json.loads(result.stdout)["decision"]
        return decision

    def fail_until_escalation(self, block: str) -> None:
        actions = [self.eval(block, BAD)["action"] for _ in range(3)]
        assert actions == ["RETRY", "RETRY", "ESCALATE"]

    def choose(self, *args: str) -> object:
        return run_cli("choose", "--session", self.session, "--context", str(self.context), *args)


def test_skip_records_the_status_and_the_round_errors_table(tmp_path: Path) -> None:
    round_3 = Round(tmp_path, 3)
    round_3.fail_until_escalation("engineer")
    chosen = round_3.choose("engineer@3", "1")
    assert chosen.exit_code == 0, chosen.output
    assert "engineer: SKIP" in chosen.stderr
    again = round_3.choose("engineer@3", "skip")
    assert again.exit_code == 2 and "was already chosen" in again.stderr
    log = run_cli("log", "--session", round_3.session, "--view", "rounds")
    assert log.exit_code == 0, log.output
    table = log.stdout.split("## Round 3 Errors\n", 1)[1]
    rows = [line for line in table.splitlines() if line.startswith("| 2")]
    assert all(ISO.match(row) for row in rows) and len(rows) == 4
    assert [row.split(" | ")[1:3] for row in rows] == [
        ["Engineer", "WRONG_FORMAT"],
        ["Engineer", "WRONG_FORMAT"],
        ["Engineer", "WRONG_FORMAT"],
        ["Engineer", "User choice"],
    ]
    assert rows[0].endswith("| Retry 1 initiated |")
    assert "skip: Skip engineer this round" in rows[3]
    assert "Status: Engineer: SKIP, Reviewer: none" in table


def test_context_allows_exactly_one_more_retry_with_the_text(tmp_path: Path) -> None:
    round_4 = Round(tmp_path, 4)
    round_4.fail_until_escalation("engineer")
    assert round_4.choose("engineer@4", "3").exit_code == 2  # the option needs --text
    assert round_4.choose("engineer@4", "9").exit_code == 2  # not offered
    text = "The flow diagram is in docs/flow.md"
    chosen = round_4.choose("engineer@4", "3", "--text", text)
    assert chosen.exit_code == 0, chosen.output
    assert text in chosen.stdout and "RETRY ATTEMPT 4 of 4" in chosen.stdout
    retried = round_4.eval("engineer", BAD)
    assert (retried["action"], retried["attempt"], retried["rule"]) == ("ESCALATE", 4, "exhausted")
    log = run_cli("log", "--session", round_4.session, "--view", "rounds").stdout
    assert f"context: Provide context ({text})" in log


def test_render_after_provide_context_sends_the_text(tmp_path: Path) -> None:
    """Seed 003 §5 "Provide context: text input added to prompt, one additional retry":
    `rules render --session` of the item, after the choice, is that retry's prompt."""
    round_3 = Round(tmp_path, 3)
    round_3.fail_until_escalation("engineer")
    text = "The gap list lives in status.md, section Open"
    assert round_3.choose("engineer@3", "3", "--text", text).exit_code == 0
    rendered = run_cli(
        "render", "--pack", "gap-review", "--block", "engineer", "--context",
        str(round_3.context), "--session", round_3.session, str(tmp_path / "engineer.md"),
    )  # fmt: skip
    assert rendered.exit_code == 0, rendered.output
    assert "RETRY ATTEMPT 4 of 4" in rendered.stdout
    assert text in rendered.stdout


def test_a_valid_output_after_the_granted_retry_proceeds(tmp_path: Path) -> None:
    round_4 = Round(tmp_path, 4)
    round_4.fail_until_escalation("engineer")
    assert round_4.choose("engineer@4", "context", "--text", "more").exit_code == 0
    assert round_4.eval("engineer", GOOD)["action"] == "PROCEED"
    log = run_cli("log", "--session", round_4.session, "--view", "rounds").stdout
    assert "| Engineer | Retry success | Valid output on retry 3 |" in log


def test_both_roles_failing_in_a_round_escalates_to_the_user(tmp_path: Path) -> None:
    round_5 = Round(tmp_path, 5)
    round_5.fail_until_escalation("engineer")
    assert [round_5.eval("reviewer", BAD)["action"] for _ in range(2)] == ["RETRY", "RETRY"]
    last = round_5.eval("reviewer", BAD)
    assert (last["action"], last["rule"]) == ("ESCALATE", "round:all-failed")
    assert last["reason"] == "Both roles failed in round 5: escalate to the user (seed 003 §5)"
    assert last["template"] is None  # for the user, not a role's prompt


def test_a_reviewer_skip_marks_the_engineer_unreviewed(tmp_path: Path) -> None:
    round_6 = Round(tmp_path, 6)
    assert round_6.eval("engineer", GOOD)["action"] == "PROCEED"
    round_6.fail_until_escalation("reviewer")
    chosen = round_6.choose("reviewer@6", "1")
    assert chosen.exit_code == 0
    assert "reviewer: SKIP" in chosen.stderr and "engineer: unreviewed" in chosen.stderr


def test_pause_and_resume(tmp_path: Path) -> None:
    round_7 = Round(tmp_path, 7)
    round_7.fail_until_escalation("engineer")
    assert round_7.choose("engineer@7", "pause").exit_code == 0
    output = tmp_path / "engineer.md"
    refused = run_cli(
        "eval",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(round_7.context),
        "--session",
        round_7.session,
        str(output),
    )
    assert refused.exit_code == 2 and "--resume" in refused.stderr
    assert run_cli("choose", "--session", round_7.session, "--resume").exit_code == 0
    assert round_7.eval("engineer", GOOD)["action"] == "PROCEED"


def test_nothing_pending_is_a_usage_error(tmp_path: Path) -> None:
    round_8 = Round(tmp_path, 8)
    assert round_8.eval("engineer", BAD)["action"] == "RETRY"
    pending = round_8.choose("engineer@8", "1")
    assert pending.exit_code == 2
    assert "no choice is pending for engineer@8: its last decision is RETRY" in pending.stderr
    assert round_8.choose("engineer@2", "1").exit_code == 2  # no attempt in that round
