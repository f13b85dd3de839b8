"""Rate limits over rounds (seed 001 §3): the gap-review engineer's DISAGREE sections, per
round, absolutely and over a window of rounds; the figures come from rate_limit_cases.yaml."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from legacy_ledger import expected, kept_rows, write_legacy
from syrupy.assertion import SnapshotAssertion

import engine
from conftest import REPO, run_cli, shipped_pack
from engine.ledger.store import LEDGER_FILE, SessionLedger, locate
from engine.pack.inputs import OutputInput
from engine.session.recording import Session

PACK_DIR = REPO / "rules" / "gap-review"
PACK = shipped_pack("gap-review")
CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent.parent / "cases" / "rate_limit_cases.yaml").read_text(encoding="utf-8")
)

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when slow
DECISION_SCHEMA = json.loads((REPO / "contracts" / "decision.schema.json").read_text())

SUMMARIES = [
    "Timestamp format consistency",
    "Error message verbosity",
    "Validation timeout threshold",
    "Recovery data persistence",
]


def issues_of(round_number: int, severities: list[str]) -> list[dict[str, str]]:
    return [
        {
            "id": f"ISSUE-R{round_number}-{i:03d}",
            "severity": severity,
            "summary": SUMMARIES[i - 1] if i <= len(SUMMARIES) else f"Issue {i}",
        }
        for i, severity in enumerate(severities, start=1)
    ]


def output_for(round_number: int, disagree: list[int], issues: int) -> str:
    """An engineer output that passes its contract: DISAGREE sections for the issues named
    by ``disagree``, a response to each of the other ``issues`` (so none is unaddressed)."""
    text = (
        "## Gap Resolution: GAP-FLOW-006\n\n**Confidence:** HIGH\n\n"
        + "The proposal in detail. " * 12
        + "\n\n### Trade-offs\n\nSome.\n\n"
    )
    for index in range(1, issues + 1):
        if index not in disagree:
            text += f"Response to ISSUE-R{round_number}-{index:03d}: done.\n\n"
    for index in disagree:
        text += (
            f"## DISAGREE: ISSUE-R{round_number}-{index:03d}\n\n**Reviewer Concern:**\n"
            "> A quote.\n\n**Engineer Position:**\nNo.\n\n**Rationale:**\nBecause.\n\n"
        )
    return text


def context_for(case: dict[str, Any]) -> dict[str, Any]:
    context: dict[str, Any] = {
        "known_gaps": ["GAP-FLOW-006"],
        "round": case["round"],
        "known_issues": issues_of(case["round"], case["issues"]),
    }
    if "history" in case:
        context["disagree_history"] = case["history"]
    return context


def decide(case: dict[str, Any], pack: engine.Pack = PACK) -> engine.Decision:
    text = output_for(case["round"], case["disagree"], len(case["issues"]))
    context = context_for(case)
    verdict = pack.evaluate("engineer", text, context=context)
    assert verdict.status == "pass", verdict.to_json()
    return pack.decide(verdict, output=text, context=context)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_rate_limit_cases(case: dict[str, Any]) -> None:
    decision = decide(case)
    expect = case["expect"]
    assert decision.action == expect["action"]
    payload = decision.to_json()
    jsonschema.validate(payload, DECISION_SCHEMA)
    if expect["action"] == "PROCEED":
        # No limit holds: the pack's `otherwise` outcome, the round's figures, no prompt.
        assert decision.limit is not None and payload["limit"]["name"] is None
        assert payload["limit"]["action"] == expect["outcome"]
        for key, value in expect.get("figures", {}).items():
            assert payload["limit"]["figures"][key] == value, key
        assert decision.rule == "pass" and decision.exit_code == 0
        return
    limit = payload["limit"]
    assert limit["action"] == decision.action
    assert decision.reason == limit["message"] == expect["message"]
    assert decision.rule == f"limit:{limit['name']}"
    assert decision.final and decision.template is None  # for the user, not a repair prompt
    if "exit_code" in expect:
        assert decision.exit_code == expect["exit_code"]
    if "recommendation" in expect:
        assert limit["recommendation"] == expect["recommendation"]
    for key, value in expect.get("figures", {}).items():
        assert limit["figures"][key] == pytest.approx(value), key


def case(name: str) -> dict[str, Any]:
    return next(c for c in CASES if c["name"] == name)


def test_example_3_presentation(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    example = case("example_3_all_high_critical_disagreed")
    text = output_for(7, example["disagree"], len(example["issues"]))
    (tmp_path / "out.md").write_text(text, encoding="utf-8")
    (tmp_path / "ctx.yaml").write_text(yaml.safe_dump(context_for(example)), encoding="utf-8")
    args = [
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(tmp_path / "ctx.yaml"),
        str(tmp_path / "out.md"),
    ]
    evaluated = run_cli("eval", "--format", "json", *args)
    assert evaluated.exit_code == 4
    decision = json.loads(evaluated.stdout)["decision"]
    assert decision["action"] == "WARN_USER"
    assert [item["id"] for item in decision["limit"]["items"]] == [
        "ISSUE-R7-001",
        "ISSUE-R7-002",
        "ISSUE-R7-003",
        "ISSUE-R7-004",
    ]
    rendered = run_cli("render", *args)
    assert rendered.exit_code == 0
    text = rendered.stdout
    assert text.startswith(
        "DISAGREE RATE WARNING\n\nEngineer disagreed with 4 of 4 "
        "HIGH/CRITICAL issues this round (100%).\n"
    )
    assert "1. ISSUE-R7-001 (HIGH): Timestamp format consistency\n" in text
    assert "4. ISSUE-R7-004 (CRITICAL): Recovery data persistence\n" in text
    assert (
        "3. Review Reviewer feedback - Check if Round 6 Reviewer issues were reasonable\n"
    ) in text
    assert text == snapshot


def test_eval_text_reports_the_limit(tmp_path: Path) -> None:
    blocked = case("six_against_twenty_blocks_the_round")
    text = output_for(5, blocked["disagree"], len(blocked["issues"]))
    (tmp_path / "out.md").write_text(text, encoding="utf-8")
    (tmp_path / "ctx.yaml").write_text(yaml.safe_dump(context_for(blocked)), encoding="utf-8")
    result = run_cli(
        "eval",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(tmp_path / "ctx.yaml"),
        str(tmp_path / "out.md"),
    )
    assert result.exit_code == 5
    assert "action     BLOCK_ROUND (attempt 1, final)\n" in result.stdout
    assert (
        "limit      absolute: Engineer submitted 6 DISAGREEs (limit: 5 per round).\n"
        in result.stdout
    )


def evaluate_in(
    session_dir: Path, round_number: int, severities: list[str], disagree: list[int]
) -> engine.Decision:
    context = {
        "known_gaps": ["GAP-FLOW-006"],
        "round": round_number,
        "known_issues": issues_of(round_number, severities),
    }
    with Session(PACK, session_dir) as session:
        text = output_for(round_number, disagree, len(severities))
        outcome = session.evaluate(
            OutputInput("engineer", text, context=context, nonce=f"r{round_number}")
        )
    return outcome.decision


def round_counts(session_dir: Path) -> list[tuple[int, int, int]]:
    db = sqlite3.connect(session_dir / LEDGER_FILE)
    try:
        return [
            tuple(row)
            for row in db.execute(
                "SELECT round, count, total FROM round_counts WHERE block = 'engineer' "
                "ORDER BY round"
            )
        ]
    finally:
        db.close()


def test_window_through_the_session_ledger(tmp_path: Path) -> None:
    session = tmp_path / "session"
    assert evaluate_in(session, 1, ["HIGH"] * 4, [1, 2]).action == "PROCEED"
    assert evaluate_in(session, 2, ["HIGH"] * 5, []).action == "PROCEED"
    # Round 2 evaluated again: its count replaces the first one, never adds to it.
    assert evaluate_in(session, 2, ["HIGH"] * 5, [1, 2]).action == "PROCEED"
    assert evaluate_in(session, 2, ["HIGH"] * 5, [1, 2]).action == "PROCEED"
    assert round_counts(session) == [(1, 2, 4), (2, 2, 5)]
    decision = evaluate_in(session, 3, ["HIGH", "HIGH", "CRITICAL"], [1])
    assert decision.action == "SYSTEMATIC_ALERT"
    assert decision.reason == "Systematic DISAGREE pattern: 5/12 (42%) across last 3 rounds."
    again = evaluate_in(session, 3, ["HIGH", "HIGH", "CRITICAL"], [1])
    assert again.reason == decision.reason
    assert round_counts(session) == [(1, 2, 4), (2, 2, 5), (3, 1, 3)]


def test_two_rounds_in_the_ledger_allow(tmp_path: Path) -> None:
    session = tmp_path / "session"
    assert evaluate_in(session, 2, ["HIGH"] * 5, [1, 2]).action == "PROCEED"
    assert evaluate_in(session, 3, ["HIGH", "HIGH", "CRITICAL"], [1]).action == "PROCEED"


def test_window_through_the_cli_session(tmp_path: Path) -> None:
    session = tmp_path / "session"
    codes = []
    for round_number, severities, disagree in [
        (1, ["HIGH"] * 4, [1, 2]),
        (2, ["HIGH"] * 5, [1, 2]),
        (2, ["HIGH"] * 5, [1, 2]),
        (3, ["HIGH", "HIGH", "CRITICAL"], [1]),
    ]:
        out = tmp_path / f"out{round_number}.md"
        ctx = tmp_path / f"ctx{round_number}.yaml"
        out.write_text(output_for(round_number, disagree, len(severities)), encoding="utf-8")
        ctx.write_text(
            yaml.safe_dump(
                {
                    "known_gaps": ["GAP-FLOW-006"],
                    "round": round_number,
                    "known_issues": issues_of(round_number, severities),
                }
            ),
            encoding="utf-8",
        )
        result = run_cli(
            "eval",
            "--pack",
            "gap-review",
            "--block",
            "engineer",
            "--context",
            str(ctx),
            "--session",
            str(session),
            "--format",
            "json",
            str(out),
        )
        codes.append(result.exit_code)
    assert codes == [0, 0, 0, 6]
    assert json.loads(result.stdout)["decision"]["limit"]["figures"]["total"] == 12


def test_outputs_that_fail_their_contract_are_not_rate_limited() -> None:
    example = case("example_3_all_high_critical_disagreed")
    text = output_for(7, example["disagree"], len(example["issues"]))
    text = text.replace("**Confidence:** HIGH", "")
    context = context_for(example)
    verdict = PACK.evaluate("engineer", text, context=context)
    decision = PACK.decide(verdict, output=text, context=context)
    assert decision.action == "RETRY" and decision.limit is None


# ------------------------------------------------------------------ pack copies


def pack_copy(tmp_path: Path, *changes: tuple[str, str]) -> engine.Pack:
    """A copy of the gap-review pack with text of its pack.yaml replaced (comments and
    YAML details kept: the pack's own loader reads it)."""
    folder = tmp_path / "gap-review-copy"
    shutil.copytree(PACK_DIR, folder)
    text = (folder / "pack.yaml").read_text(encoding="utf-8")
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "pack.yaml").write_text(text, encoding="utf-8")
    return engine.load_pack(folder)


PER_ROUND = "        threshold: 0.5\n"
ABSOLUTE_MESSAGE = (
    '        message: "Engineer submitted {count} DISAGREEs (limit: {threshold} per round)."\n'
)
WINDOW = "    window: {rounds: 3, min_rounds: 3}\n"


def test_copy_with_another_threshold(tmp_path: Path) -> None:
    copy = pack_copy(
        tmp_path,
        (PER_ROUND, "        threshold: 0.8\n"),
        (
            '        compare: ">"\n        threshold: 0.8',
            '        compare: ">="\n        threshold: 0.8',
        ),
    )
    eighty = case("four_of_five_is_80_percent")
    assert decide(eighty, copy).action == "WARN_USER"
    assert decide({**eighty, "disagree": [1, 2, 3]}, copy).action == "PROCEED"
    assert decide({**eighty, "disagree": [1, 2, 3]}).action == "WARN_USER"


def test_copy_with_another_window(tmp_path: Path) -> None:
    copy = pack_copy(tmp_path, (WINDOW, "    window: {rounds: 2, min_rounds: 2}\n"))
    two = case("two_rounds_only_allow")
    assert decide(two).action == "PROCEED"
    decision = decide({**two, "history": [[2, 3, 5]]}, copy)
    assert decision.action == "SYSTEMATIC_ALERT"
    assert decision.reason == "Systematic DISAGREE pattern: 4/8 (50%) across last 2 rounds."


def test_copy_with_another_order(tmp_path: Path) -> None:
    folder_text = (PACK_DIR / "pack.yaml").read_text(encoding="utf-8")
    first = folder_text[
        folder_text.index("      - name: per_round") : folder_text.index("      - name: absolute")
    ]
    second = folder_text[
        folder_text.index("      - name: absolute") : folder_text.index(
            "      - name: session_pattern"
        )
    ]
    copy = pack_copy(tmp_path, (first + second, second + first))
    all_six = {"round": 5, "issues": ["HIGH"] * 6, "disagree": [1, 2, 3, 4, 5, 6]}
    assert decide(all_six).action == "WARN_USER"
    assert decide(all_six, copy).action == "BLOCK_ROUND"


def test_copy_with_another_wording(tmp_path: Path) -> None:
    copy = pack_copy(
        tmp_path,
        (ABSOLUTE_MESSAGE, '        message: "{count} objections; at most {threshold} allowed."\n'),
        ("        action: BLOCK_ROUND\n", "        action: STOP\n"),
    )
    decision = decide(case("six_against_twenty_blocks_the_round"), copy)
    assert (decision.action, decision.reason) == ("STOP", "6 objections; at most 5 allowed.")


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        ("{unknown} of them", "invalid-message"),
        ("{ratio:.0Q}", "invalid-message"),
        ("{count.__class__}", "invalid-message"),
    ],
)
def test_messages_are_checked_at_load(tmp_path: Path, message: str, rule: str) -> None:
    with pytest.raises(engine.PackError) as raised:
        pack_copy(tmp_path, (ABSOLUTE_MESSAGE, f"        message: {json.dumps(message)}\n"))
    assert any(f.rule == rule for f in raised.value.findings)


def test_a_version_3_ledger_gains_round_counts(tmp_path: Path) -> None:
    written = write_legacy(tmp_path / LEDGER_FILE, 3)  # before round counts (migration 4)
    with SessionLedger(locate(tmp_path)) as ledger:
        assert ledger.round_counts("engineer") == []
        assert [row["attempt"] for row in ledger.attempts()] == [1, 2]
    assert kept_rows(tmp_path / LEDGER_FILE, written) == expected(written)


def test_limit_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(engine.PackError) as raised:
        pack_copy(
            tmp_path,
            (
                "        presentation: disagree_rate_warning\n      - name: absolute",
                "        presentation: retry\n      - name: absolute",
            ),
            (WINDOW, "    window: {rounds: 2, min_rounds: 3}\n"),
            ("item.severity in", "issue.severity in"),
        )
    rules = sorted(f.rule for f in raised.value.findings)
    assert rules == ["invalid-window", "unknown-variable", "wrong-template-purpose"]


def test_the_pack_has_no_no_behaviour_warning() -> None:
    result = engine.check_packs([str(PACK_DIR)])[0]
    assert result.findings == []


def test_copy_without_an_otherwise_outcome_reports_no_limit(tmp_path: Path) -> None:
    copy = pack_copy(
        tmp_path,
        (
            "    otherwise: ALLOW  # reported when no limit holds, as "
            "check_disagree_rate returns\n",
            "",
        ),
    )
    decision = decide(case("two_rounds_only_allow"), copy)
    assert decision.action == "PROCEED"
    assert decision.limit is None and "limit" not in decision.to_json()
