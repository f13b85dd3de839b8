"""Conflict resolution (seed 001 §4-§8, Examples 1-2) through the real CLI and a real
session ledger; the option cases are data: tests/cases/conflict_cases.yaml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from syrupy.assertion import SnapshotAssertion

from conftest import REPO, run_cli

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent.parent / "cases" / "conflict_cases.yaml").read_text(encoding="utf-8")
)
PACK_DIR = REPO / "rules" / "gap-review"

HEADER = (
    "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n"
    + "The proposal in detail. " * 12
    + "\n\n### Trade-offs\n\nSome.\n\n"
)

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when slow

EXAMPLE_1_SECTION = """## DISAGREE: ISSUE-R5-003

**Reviewer Concern:**
> "Retry mechanism should use exponential backoff. Implement 1s, 2s, 4s delays
> between retries. Linear retries may overwhelm failed services."

**Engineer Position:**
Exponential backoff adds complexity for marginal benefit in this context.

**Rationale:**
The retry target here is local file validation, not remote services. File system
operations complete or fail fast (<100ms). Adding delays would only slow the
workflow without reducing failure likelihood.

**Alternative Approach:**
Keep instant retries for file operations. Add note that remote operation retries
(future scope) should use backoff.

**Request:** Escalate to user for resolution
"""

# Seed 001 Example 1's decisions.md entry, in the Quick Reference's Entry Format (which
# has no Positions block), under its round heading.
EXAMPLE_1_DECISIONS = """## Round 6 Conflict Resolutions

### ISSUE-R5-003: Retry timing mechanism

**Conflict Type:** Explicit DISAGREE
**Gap Affected:** GAP-FLOW-001
**Severity:** HIGH

**Resolution:**
- **Chosen Option:** C (Synthesis)
- **Decision:** Context-aware retry timing. Instant for file ops, note that remote
  operations should use backoff when implemented.
- **Rationale:** Both concerns valid - file ops are fast, remote ops need backoff
- **Constraints:** Must document which operations use which strategy

**Action Required:**
- For Engineer: Update retry implementation to note context-awareness. Add comment
  for future remote operation backoff.
- For Gap: GAP-FLOW-001 may proceed with this approach.

**Decided By:** User
**Timestamp:** 2026-01-12T15:30:00Z
"""


def section(ref: str, position: str, rationale: str) -> str:
    return (
        f"## DISAGREE: {ref}\n\n**Reviewer Concern:**\n> A quote.\n\n"
        f"**Engineer Position:**\n{position}\n\n**Rationale:**\n{rationale}\n\n"
    )


def write_case(
    tmp_path: Path, round_number: int, issues: list[dict[str, Any]], text: str
) -> tuple[Path, Path]:
    context = {"known_gaps": ["GAP-FLOW-001"], "round": round_number, "known_issues": issues}
    ctx = tmp_path / f"ctx{round_number}.yaml"
    ctx.write_text(yaml.safe_dump(context), encoding="utf-8")
    out = tmp_path / f"out{round_number}.md"
    out.write_text(HEADER + text, encoding="utf-8")
    return ctx, out


def detect(session: Path, ctx: Path, out: Path, pack: str = "gap-review") -> Any:
    return run_cli(
        "conflicts",
        "detect",
        "--pack",
        pack,
        "--session",
        str(session),
        "--context",
        str(ctx),
        str(out),
    )


def listed(session: Path, pack: str | None = None) -> list[dict[str, Any]]:
    extra = ["--pack", pack] if pack else []
    result = run_cli("conflicts", "list", "--session", str(session), "--format", "json", *extra)
    assert result.exit_code == 0, result.output
    conflicts: list[dict[str, Any]] = json.loads(result.stdout)["conflicts"]
    return conflicts


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conflict_cases(case: dict[str, Any], tmp_path: Path) -> None:
    text = "".join(
        section(ref, s["position"], s["rationale"]) for ref, s in case["disagree"].items()
    )
    ctx, out = write_case(tmp_path, case["round"], case["issues"], text)
    session = tmp_path / "session"
    result = detect(session, ctx, out)
    assert result.exit_code == 0, result.output
    for ref in case.get("convert", []):
        assert listed(session)[0]["status"] == "flagged"
        converted = run_cli("conflicts", "convert", "--session", str(session), ref)
        assert converted.exit_code == 0, converted.output
    by_ref = {c["ref"]: c for c in listed(session)}
    for ref, expect in case["expect"].items():
        conflict = by_ref[ref]
        assert conflict["status"] == expect["status"]
        options = {o["label"]: o for o in conflict["options"]}
        assert list(options) == expect["options"]
        assert [o["label"] for o in conflict["options"] if o["recommended"]] == expect[
            "recommended"
        ]
        for label in "ABCD":
            if label in expect:
                assert options[label]["text"] == expect[label]


def test_example_1_end_to_end(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    ctx, out = write_case(tmp_path, 6, CASES[0]["issues"], EXAMPLE_1_SECTION)
    session = tmp_path / "session"
    detected = detect(session, ctx, out)
    assert detected.exit_code == 0, detected.output
    assert detected.stdout.startswith("CONFLICT 1 of 1\n\n### Conflict: ISSUE-R5-003\n")
    assert "**Synthesized Option (Option C):**" not in detected.stdout
    assert detected.stdout == snapshot(name="detected")
    # C was not offered yet: a usage error, nothing recorded.
    early = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R5-003",
        "--option",
        "C",
        "--decision",
        "x",
        "--rationale",
        "y",
    )
    assert early.exit_code == 2
    assert "option C was not offered for ISSUE-R5-003 (offered: A, B)" in early.stderr
    proposed = run_cli(
        "conflicts",
        "propose",
        "--session",
        str(session),
        "ISSUE-R5-003",
        "--synthesis",
        "Implement context-aware retry timing:\n- File operations: Instant retry (no delay)\n"
        "- Remote operations (future): Exponential backoff\nAdd configuration flag for "
        "override.",
        "--trade-off",
        "Documentation overhead + future implementation complexity",
    )
    assert proposed.exit_code == 0, proposed.output
    assert proposed.stdout == snapshot(name="proposed")
    resolved = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R5-003",
        "--option",
        "C",
        "--decision",
        "Context-aware retry timing. Instant for file ops, note that remote\n"
        "  operations should use backoff when implemented.",
        "--rationale",
        "Both concerns valid - file ops are fast, remote ops need backoff",
        "--constraints",
        "Must document which operations use which strategy",
        "--action",
        "engineer=Update retry implementation to note context-awareness. Add "
        "comment\n  for future remote operation backoff.",
        "--action",
        "gap=GAP-FLOW-001 may proceed with this approach.",
        "--now",
        "2026-01-12T15:30:00Z",
    )
    assert resolved.exit_code == 0, resolved.output
    decisions = run_cli("log", "--session", str(session), "--view", "decisions")
    assert decisions.exit_code == 0, decisions.output
    assert decisions.stdout == EXAMPLE_1_DECISIONS
    again = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R5-003",
        "--option",
        "A",
        "--decision",
        "x",
        "--rationale",
        "y",
    )
    assert again.exit_code == 2 and "already resolved" in again.stderr
    assert listed(session)[0]["resolution"]["option"] == "C"


def test_example_2_converted_and_resolved_with_a(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    case = CASES[-1]
    ctx, out = write_case(tmp_path, 5, case["issues"], "")
    session = tmp_path / "session"
    detected = detect(session, ctx, out)
    assert detected.exit_code == 0
    assert detected.stdout.startswith("flag ISSUE-R4-007 (CRITICAL): not addressed")
    # A flag blocks nothing and cannot be resolved before it is converted.
    flag = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R4-007",
        "--option",
        "A",
        "--decision",
        "x",
        "--rationale",
        "y",
    )
    assert flag.exit_code == 2 and "convert it first" in flag.stderr
    converted = run_cli("conflicts", "convert", "--session", str(session), "ISSUE-R4-007")
    assert converted.exit_code == 0
    text = converted.stdout
    assert "**Reviewer Position (Option A):** [RECOMMENDED]\n" in text
    assert (
        "Not explicitly stated - Engineer did not address this issue\n\nNOTE: This "
        "conflict was detected automatically" in text
    )
    assert "**Option D: User Specifies Alternative**\n(Available for CRITICAL severity)" in text
    assert text == snapshot(name="converted")
    resolved = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R4-007",
        "--option",
        "A",
        "--decision",
        "Implement strict mode validation. Fail on unexpected keys.",
        "--rationale",
        "CRITICAL severity - cannot risk silent data loss",
        "--action",
        "engineer=Implement strict validation. Must reject unknown fields.",
        "--action",
        "gap=GAP-COMM-004 must include strict validation before ACCEPTED.",
        "--now",
        "2026-01-12T16:00:00Z",
    )
    assert resolved.exit_code == 0
    record = run_cli("log", "--session", str(session), "--view", "decisions").stdout
    assert "**Conflict Type:** Implicit (converted)\n" in record
    assert "- **Chosen Option:** A (Reviewer)\n" in record
    assert "- **Constraints:** None\n" in record
    assert "**Timestamp:** 2026-01-12T16:00:00Z\n" in record


def three_conflicts(tmp_path: Path, pack: str = "gap-review") -> Path:
    """Two CRITICAL conflicts (rounds 3 and 2) and one HIGH (round 2), in one session."""
    session = tmp_path / "session"
    issues = [
        {
            "id": "ISSUE-R1-004",
            "severity": "HIGH",
            "summary": "s4",
            "suggestion": "x",
            "impact": "y",
            "gap": "GAP-FLOW-001",
        },
        {
            "id": "ISSUE-R1-009",
            "severity": "CRITICAL",
            "summary": "s9",
            "suggestion": "x",
            "impact": "y",
            "gap": "GAP-FLOW-001",
        },
    ]
    ctx, out = write_case(
        tmp_path,
        2,
        issues,
        section("ISSUE-R1-004", "No.", "Because.") + section("ISSUE-R1-009", "No.", "Because."),
    )
    assert detect(session, ctx, out, pack).exit_code == 0
    later = [
        {
            "id": "ISSUE-R2-001",
            "severity": "CRITICAL",
            "summary": "s1",
            "suggestion": "x",
            "impact": "y",
            "gap": "GAP-FLOW-001",
        }
    ]
    ctx, out = write_case(tmp_path, 3, later, section("ISSUE-R2-001", "No.", "Because."))
    assert detect(session, ctx, out, pack).exit_code == 0
    return session


def test_priority_order_critical_first_older_round_first(tmp_path: Path) -> None:
    session = three_conflicts(tmp_path)
    order = [(c["ref"], c["severity"], c["round"]) for c in listed(session)]
    assert order == [
        ("ISSUE-R1-009", "CRITICAL", 2),
        ("ISSUE-R2-001", "CRITICAL", 3),
        ("ISSUE-R1-004", "HIGH", 2),
    ]


def test_priority_order_reads_the_round_in_the_id_not_the_round_found(tmp_path: Path) -> None:
    """Seed 001 §7: severity, then the issue's own round (R2 in ISSUE-R2-005), then its
    number; ISSUE-R3-002 was found a round earlier but was raised a round later."""
    session = tmp_path / "session"

    def issue(ref: str) -> dict[str, str]:
        return {"id": ref, "severity": "CRITICAL", "summary": "s", "suggestion": "x",
                "impact": "y", "gap": "GAP-FLOW-001"}  # fmt: skip

    for found, ref in [(4, "ISSUE-R3-002"), (5, "ISSUE-R2-005"), (5, "ISSUE-R2-001")]:
        ctx, out = write_case(tmp_path, found, [issue(ref)], section(ref, "No.", "Because."))
        assert detect(session, ctx, out, "gap-review").exit_code == 0
    order = [(c["ref"], c["round"]) for c in listed(session)]
    assert order == [("ISSUE-R2-001", 5), ("ISSUE-R2-005", 5), ("ISSUE-R3-002", 4)]


@pytest.mark.parametrize(
    ("resolve", "state", "code", "outcome"),
    [
        ([], "COMPLETE", 1, "blocked"),
        ([], "USER_APPROVED", 1, "blocked"),
        ([], "ABANDONED", 0, "allowed"),
        (["ISSUE-R1-009", "ISSUE-R2-001"], "COMPLETE", 1, "blocked"),
        (["ISSUE-R1-009", "ISSUE-R2-001"], "GOOD_ENOUGH", 1, "blocked"),
        (["ISSUE-R1-009", "ISSUE-R2-001"], "USER_APPROVED", 4, "warn"),
        (["ISSUE-R1-009", "ISSUE-R2-001", "ISSUE-R1-004"], "COMPLETE", 0, "allowed"),
    ],
)
def test_termination_table(
    tmp_path: Path, resolve: list[str], state: str, code: int, outcome: str
) -> None:
    session = three_conflicts(tmp_path)
    for ref in resolve:
        done = run_cli(
            "conflicts",
            "resolve",
            "--session",
            str(session),
            ref,
            "--option",
            "A",
            "--decision",
            "d",
            "--rationale",
            "r",
        )
        assert done.exit_code == 0, done.output
    result = run_cli("conflicts", "termination", "--session", str(session), state)
    assert result.exit_code == code, result.output
    assert result.stdout.endswith(f"{state}: {outcome}\n")
    if outcome == "blocked":
        assert "is unresolved: it blocks" in result.stdout


def test_a_waived_conflict_blocks_nothing(tmp_path: Path) -> None:
    session = three_conflicts(tmp_path)
    for ref in ("ISSUE-R1-009", "ISSUE-R2-001", "ISSUE-R1-004"):
        assert run_cli("conflicts", "waive", "--session", str(session), ref).exit_code == 0
    assert run_cli("conflicts", "termination", "--session", str(session), "COMPLETE").exit_code == 0


@pytest.mark.folder_ledger
def test_usage_errors(tmp_path: Path) -> None:
    session = three_conflicts(tmp_path)
    unknown = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R9-999",
        "--option",
        "A",
        "--decision",
        "d",
        "--rationale",
        "r",
    )
    assert unknown.exit_code == 2 and "no conflict 'ISSUE-R9-999'" in unknown.stderr
    state = run_cli("conflicts", "termination", "--session", str(session), "DONE")
    assert state.exit_code == 2 and "unknown termination state 'DONE'" in state.stderr
    empty = run_cli("conflicts", "list", "--session", str(tmp_path / "none"))
    assert empty.exit_code == 2 and "no ledger here" in empty.stderr


def copy_pack(tmp_path: Path, *changes: tuple[str, str]) -> str:
    folder = tmp_path / "gap-review-copy"
    shutil.copytree(PACK_DIR, folder)
    text = (folder / "pack.yaml").read_text(encoding="utf-8")
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "pack.yaml").write_text(text, encoding="utf-8")
    return str(folder)


@pytest.mark.heavy
def test_copies_change_behaviour_without_code(tmp_path: Path) -> None:
    pack = copy_pack(
        tmp_path,
        ("      contains: [complexity]\n", "      contains: [local file]\n"),
        ("      trade_off: Maximum flexibility\n", "      trade_off: Your call\n"),
        (
            "  severity_order: [CRITICAL, HIGH, MEDIUM, LOW]\n",
            "  severity_order: [HIGH, CRITICAL, MEDIUM, LOW]\n",
        ),
        (
            "      - {severity: HIGH, blocks: [COMPLETE, GOOD_ENOUGH], warns: [USER_APPROVED]}\n",
            "      - {severity: HIGH, blocks: []}\n",
        ),
    )
    # Another synthesis rule: Example 1's rationale now gets a C on its own.
    ctx, out = write_case(tmp_path, 6, CASES[0]["issues"], EXAMPLE_1_SECTION)
    session = tmp_path / "s1"
    assert detect(session, ctx, out, pack).exit_code == 0
    [conflict] = listed(session)
    assert [o["label"] for o in conflict["options"]] == ["A", "B", "C"]
    # Another order (HIGH first), another option text and termination table.
    (tmp_path / "round").mkdir()
    session = three_conflicts(tmp_path / "round", pack)
    conflicts = listed(session)
    assert [c["ref"] for c in conflicts] == ["ISSUE-R1-004", "ISSUE-R1-009", "ISSUE-R2-001"]
    d = next(o for o in conflicts[1]["options"] if o["label"] == "D")
    assert d["trade_off"] == "Your call"
    for ref in ("ISSUE-R1-009", "ISSUE-R2-001"):
        run_cli(
            "conflicts",
            "resolve",
            "--session",
            str(session),
            ref,
            "--option",
            "A",
            "--decision",
            "d",
            "--rationale",
            "r",
        )
    shipped = run_cli(
        "conflicts", "termination", "--session", str(session), "--pack", "gap-review", "COMPLETE"
    )
    copied = run_cli("conflicts", "termination", "--session", str(session), "COMPLETE")
    assert (shipped.exit_code, copied.exit_code) == (1, 0)


def test_a_session_enforces_its_decisions(tmp_path: Path) -> None:
    ctx, out = write_case(tmp_path, 6, CASES[0]["issues"], EXAMPLE_1_SECTION)
    session = tmp_path / "session"
    assert detect(session, ctx, out).exit_code == 0
    args = [
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
    ]
    before = run_cli(*args)
    assert json.loads(before.stdout)["verdict"]["status"] == "pass"
    resolved = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R5-003",
        "--option",
        "A",
        "--decision",
        "Backoff.",
        "--rationale",
        "Safer.",
    )
    assert resolved.exit_code == 0
    after = run_cli(*args)
    assert after.exit_code == 3
    verdict = json.loads(after.stdout)["verdict"]
    assert verdict["failures"][0]["type"] == "RE_ARGUED_CONFLICT"
    assert verdict["failures"][0]["message"] == (
        "Engineer re-argued ISSUE-R5-003 which was already resolved by user."
    )


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("  explicit: disagree ", "  explicit: addressed ", "unknown-check"),
        (
            "      - {severity: HIGH, blocks: [COMPLETE, GOOD_ENOUGH], warns: [USER_APPROVED]}\n",
            "      - {severity: SEVERE, blocks: [COMPLETE]}\n",
            "unknown-severity",
        ),
        (
            "      - {severity: HIGH, blocks: [COMPLETE, GOOD_ENOUGH], warns: [USER_APPROVED]}\n",
            "      - {severity: HIGH, blocks: [DONE]}\n",
            "unknown-state",
        ),
        ("    - label: D\n", "    - label: A\n", "duplicate-option"),
        (
            "  presentation: conflict_presentation\n",
            "  presentation: escalation\n",
            "wrong-template-purpose",
        ),
    ],
)
def test_rules_check_catches_bad_conflict_rules(
    tmp_path: Path, old: str, new: str, rule: str
) -> None:
    pack = copy_pack(tmp_path, (old, new))
    result = run_cli("check", "--format", "json", pack)
    assert result.exit_code == 1, result.output
    assert rule in {f["rule"] for f in json.loads(result.stdout)["packs"][0]["findings"]}


def test_resolution_actions_are_the_packs(tmp_path: Path) -> None:
    session = three_conflicts(tmp_path)
    unknown = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R1-004",
        "--option",
        "A",
        "--decision",
        "d",
        "--rationale",
        "r",
        "--action",
        "author=x",
    )
    assert unknown.exit_code == 2
    assert (
        "--action author: not an action of the pack (conflicts.actions: engineer, gap)"
        in unknown.stderr
    )
    bad = run_cli(
        "conflicts",
        "resolve",
        "--session",
        str(session),
        "ISSUE-R1-004",
        "--option",
        "A",
        "--decision",
        "d",
        "--rationale",
        "r",
        "--action",
        "x",
    )
    assert bad.exit_code == 2 and "--action expects KEY=VALUE" in bad.stderr


def test_detect_reads_no_more_than_its_cap_and_names_the_option(tmp_path: Path) -> None:
    case = CASES[0]
    text = "".join(
        section(ref, s["position"], s["rationale"]) for ref, s in case["disagree"].items()
    )
    ctx, out = write_case(tmp_path, case["round"], case["issues"], text)
    size = out.stat().st_size
    session = tmp_path / "session"
    base = ["conflicts", "detect", "--pack", "gap-review", "--session", str(session)]
    base += ["--context", str(ctx)]
    refused = run_cli(*base, "--max-output-bytes", str(size - 1), str(out))
    assert refused.exit_code == 2
    assert f"larger than {size - 1} bytes (--max-output-bytes" in refused.stderr
    assert not session.exists() or listed(session) == []  # nothing recorded
    assert run_cli(*base, "--max-output-bytes", str(size), str(out)).exit_code == 0
