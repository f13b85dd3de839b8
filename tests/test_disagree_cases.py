"""Seed 001's DISAGREE sections and unaddressed issues through the gap-review pack (its cases
are the pack's own tests, rules/gap-review/tests/seed001_disagree.yaml); pack copies with
other wording; `rules check` on the checks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

import engine
from conftest import REPO, run_cli, shipped_pack

PACK = shipped_pack("gap-review")
# Seed 001's cases are the pack's own tests (`rules test rules/gap-review` runs them).
CASES: list[dict[str, Any]] = yaml.safe_load(
    (REPO / "rules" / "gap-review" / "tests" / "seed001_disagree.yaml").read_text(encoding="utf-8")
)

BASE = """## Gap Resolution: GAP-FLOW-001

**Confidence:** HIGH

### Proposed Solution
{filler}

### Trade-offs
Some.

""".format(filler="x" * 220)


def context(
    issues: list[dict[str, Any]] | None, decided: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    ctx: dict[str, Any] = {"known_gaps": ["GAP-FLOW-001"]}
    if issues is not None:
        ctx["known_issues"] = issues
    if decided is not None:
        ctx["decided_conflicts"] = decided
    return ctx


def test_the_packs_seed_001_cases_pass() -> None:
    result = run_cli("test", str(REPO / "rules" / "gap-review"), "--format", "json")
    cases = [c for pack in json.loads(result.stdout)["packs"] for c in pack["cases"]]
    names = {c["name"] for c in CASES}
    assert [c["problems"] for c in cases if c["name"] in names and not c["passed"]] == []
    assert len(names & {c["name"] for c in cases}) == len(CASES) == 23


def test_the_cases_cover_every_failure_of_the_checks() -> None:
    failures = {c["expect"].get("failure") for c in CASES}
    assert {"INVALID_DISAGREE_REF", "MALFORMED_DISAGREE", "RE_ARGUED_CONFLICT"} <= failures
    assert any(c["expect"]["status"] == "warn" for c in CASES)


def test_seed_001_itself_still_passes() -> None:
    """Its DISAGREE examples sit in fenced code blocks: they are not sections."""
    seed = Path(__file__).parent / "fixtures" / "seeds"
    text = next(seed.glob("001*.txt")).read_text(encoding="utf-8")
    ctx = yaml.safe_load((REPO / "examples" / "gap-review" / "ctx-001.yaml").read_text())
    verdict = PACK.evaluate("engineer", text, context=ctx)
    assert verdict.status == "pass"
    assert "disagree" not in verdict.data


# ------------------------------------------------------------------ pack copies


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    target = tmp_path / "gap-review"
    shutil.copytree(REPO / "rules" / "gap-review", target)
    return target


def edit(folder: Path, *replacements: tuple[str, str]) -> None:
    pack = folder / "pack.yaml"
    text = pack.read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    pack.write_text(text, encoding="utf-8")


SECTION = """## OBJECTION: ISSUE-R5-003

**Reviewer Concern:**
> quote

**Why:**
Because.
"""


def test_a_copy_with_other_heading_markers_and_wording(pack_copy: Path) -> None:
    edit(
        pack_copy,
        (
            "'## DISAGREE:\\s*ISSUE-R(\\d{1,2})-(\\d{3})'",
            "'## OBJECTION:\\s*ISSUE-R(\\d{1,2})-(\\d{3})'",
        ),
        ('text: "**Rationale:**"', 'text: "**Why:**"'),
        (
            'message: "DISAGREE references {id} which does not exist"',
            'message: "Objection to unknown {id}"',
        ),
    )
    copy = engine.load_pack(pack_copy)
    issues = [{"id": "ISSUE-R5-003", "severity": "HIGH"}]
    assert copy.evaluate("engineer", BASE + SECTION, context=context(issues)).status == "pass"
    assert PACK.evaluate("engineer", BASE + SECTION, context=context(issues)).status == "warn"
    unknown = copy.evaluate("engineer", BASE + SECTION, context=context([]))
    assert unknown.error == "Objection to unknown ISSUE-R5-003"


def test_a_copy_with_other_severities_ratio_and_effect(pack_copy: Path) -> None:
    edit(
        pack_copy,
        ("where: {key: severity, in: [HIGH, CRITICAL]}", "where: \"item.severity == 'MEDIUM'\""),
        ("effect: suppress", 'effect: warn\n          message: "{id} may be addressed"'),
        ("ratio: 0.5", "ratio: 0.2"),
    )
    copy = engine.load_pack(pack_copy)
    issues = [
        {"id": "ISSUE-R4-007", "severity": "CRITICAL", "summary": "a b c d e"},
        {"id": "ISSUE-R4-008", "severity": "MEDIUM", "summary": "schema one two three"},
    ]
    verdict = copy.evaluate("engineer", BASE + "The schema.\n", context=context(issues))
    assert verdict.warnings == ["ISSUE-R4-008 may be addressed"]
    assert verdict.data["addressed"][0]["match"] == "soft"
    original = PACK.evaluate("engineer", BASE + "The schema.\n", context=context(issues))
    assert original.warnings == [
        "Engineer output contains no reference to ISSUE-R4-007 (CRITICAL issue)"
    ]


# ------------------------------------------------------------------ rules check


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("'## DISAGREE:\\s*ISSUE-R(\\d{1,2})-(\\d{3})'", "'## DISAGREE:(?=x)'", "invalid-pattern"),
        (
            'fail: MALFORMED_DISAGREE\n            message: "DISAGREE for {id} missing '
            "'**Rationale:**'\"",
            "fail: MALFORMED_DISAGRE",
            "unknown-failure-type",
        ),
        (
            "fail: INVALID_DISAGREE_REF\n        message",
            "fail: INVALID_REF\n        message",
            "unknown-failure-type",
        ),
        ('id: "ISSUE-R{1}-{2}"', 'id: "ISSUE-R{1}-{3}"', "unknown-group"),
        ("sections: [disagree]", "sections: [disagreement]", "unknown-sections"),
        (
            "where: {key: severity, in: [HIGH, CRITICAL]}",
            "where: \"issue.severity == 'HIGH'\"",
            "unknown-variable",
        ),
        ("items: known_issues", "items: known_isues", "unknown-context-key"),
        ("item: [round]", "item: [rounds]", "unknown-item-part"),
    ],
)
def test_rules_check_catches_bad_checks(pack_copy: Path, old: str, new: str, rule: str) -> None:
    edit(pack_copy, (old, new))
    result = run_cli("check", str(pack_copy), "--format", "json")
    assert result.exit_code != 0
    assert rule in result.stdout


def test_keywords_are_lower_case_words_minus_stop_words() -> None:
    from engine.contracts.kinds.markdown.kind import keywords

    assert keywords("Schema validation MUST reject unknown_fields (v2)!", ["must"]) == {
        "schema",
        "validation",
        "reject",
        "unknown",
        "fields",
        "v2",
    }


def test_a_where_expression_failing_on_an_item_is_a_context_error(pack_copy: Path) -> None:
    edit(
        pack_copy,
        (
            "where: {key: severity, in: [HIGH, CRITICAL]}",
            "where: \"item.severity.upper() == 'HIGH'\"",
        ),
    )
    copy = engine.load_pack(pack_copy)
    with pytest.raises(engine.EngineError, match="on an item of 'known_issues' failed"):
        copy.evaluate("engineer", BASE, context=context([{"id": "ISSUE-R1-001"}]))


def test_a_malformed_disagree_is_retried_with_the_mandatory_format(tmp_path: Path) -> None:
    output = tmp_path / "engineer.md"
    output.write_text(BASE + "## DISAGREE: ISSUE-R4-001\n\nno markers\n", encoding="utf-8")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text(
        yaml.safe_dump(context([{"id": "ISSUE-R4-001", "severity": "HIGH"}])), encoding="utf-8"
    )
    args = ("--pack", "gap-review", "--block", "engineer", "--context", str(ctx), str(output))
    decided = run_cli("eval", *args)
    assert "RETRY" in decided.stdout
    prompt = run_cli("render", *args).stdout
    assert "DISAGREE for ISSUE-R4-001 missing '**Reviewer Concern:**' quote" in prompt
    assert "## DISAGREE: ISSUE-R{N}-{XXX}" in prompt
    assert "- ISSUE-R4-001" in prompt
