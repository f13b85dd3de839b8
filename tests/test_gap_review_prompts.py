"""gap-review retry prompts: modifications per failure type, example tiers (seed 000),
selection, scoring, budgets and structural truncation, escalation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

import engine
from conftest import REPO, run_cli, shipped_pack
from engine.pack.inputs import OutputInput
from engine.prompts.examples.select import earlier_rounds, select_example, truncate_example

PACK = shipped_pack("gap-review")
EXAMPLES = PACK.model.examples
IDS = PACK.contract("engineer").id_patterns
GAPS = ["GAP-FLOW-001", "GAP-FLOW-002"]

FAILING = {
    "FILE_MISSING": None,
    "EMPTY_OUTPUT": "\n",
    "WRONG_FORMAT": "# A proposal without the headers\n",
    "NO_GAPS_ADDRESSED": "## Gap Resolution: the flow\n\n**Confidence:** LOW\n",
    "INCONSISTENT_REFS": "## Gap Resolution: GAP-FLOW-404\n\n**Confidence:** LOW\n",
}


def session(tmp_path: Path, rounds: dict[int, str], role: str = "engineer") -> Path:
    root = tmp_path / "session"
    for n, text in rounds.items():
        folder = root / f"round_{n:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{role}.md").write_text(text)
    return root


def proposal(gaps: list[str], extra: str = "", size: int = 0) -> str:
    parts = [
        f"## Gap Resolution: {g}\n\n**Confidence:** HIGH\n\n### Proposed Solution\n"
        f"Solve {g}.{extra}\n"
        for g in gaps
    ]
    text = "\n".join(parts)
    return text + "x" * max(size - len(text), 0)


def prompt_for(failure: str, context: dict[str, Any], pack: Any = PACK, attempt: int = 1) -> str:
    text = FAILING[failure]
    verdict = pack.evaluate("engineer", text, context=context, path="round_004/engineer.md")
    assert verdict.failure_type == failure
    decision = pack.decide(verdict, output=text or "", attempt=attempt, context=context)
    rendered: str = pack.render(verdict, decision, output=text or "", context=context)
    return rendered


BASE_CONTEXT: dict[str, Any] = {
    "known_gaps": GAPS,
    "round": 4,
    "original_prompt": "You are the Engineer. Write round 4.",
    "expected_path": "round_004/engineer.md",
}


@pytest.mark.parametrize("failure", list(FAILING))
def test_retry_prompt_per_failure_type(
    failure: str, snapshot: SnapshotAssertion, tmp_path: Path
) -> None:
    context = {
        **BASE_CONTEXT,
        "session_dir": str(
            session(
                tmp_path,
                {
                    2: proposal(["GAP-FLOW-001"], " Details." * 80),
                    3: proposal(["GAP-FLOW-002"], " More." * 80),
                },
            )
        ),
    }
    assert prompt_for(failure, context) == snapshot


# ------------------------------------------------------------------ seed 000 §5, row by row


def choose(
    failure: str,
    context: dict[str, Any],
    examples: Any = EXAMPLES,
    root: Path = PACK.root,
    accepted: Any = None,
) -> Any:
    rounds = earlier_rounds(PACK.model.session, context, accepted)
    return select_example(examples, root, "engineer", failure, context, IDS, rounds)


@pytest.mark.parametrize(
    ("failure", "with_session", "tier", "source"),
    [
        ("FILE_MISSING", True, "none", "No example attached - file creation issue"),
        ("EMPTY_OUTPUT", True, "canonical", "Canonical example from workflow spec"),
        ("WRONG_FORMAT", True, "canonical", "Canonical example - note required headers"),
        ("NO_GAPS_ADDRESSED", True, "session", "Example showing gap references in context"),
        ("NO_GAPS_ADDRESSED", False, "canonical", "Canonical example + gap list for reference"),
        ("INCONSISTENT_REFS", True, "session", "Valid gap list + successful example"),
        ("INCONSISTENT_REFS", False, "template", "Valid gap list + template"),
    ],
)
def test_selection_table(
    tmp_path: Path, failure: str, with_session: bool, tier: str, source: str
) -> None:
    rounds = {2: proposal(["GAP-FLOW-001"])} if with_session else {}
    context = {**BASE_CONTEXT, "session_dir": str(session(tmp_path, rounds))}
    chosen = choose(failure, context)
    assert (chosen.tier, chosen.source) == (tier, source)
    shown, _ = chosen.fitted(8000, EXAMPLES.priority_sections, EXAMPLES.truncation_notice)
    if "gap list" in source:
        assert "- GAP-FLOW-001\n- GAP-FLOW-002\n" in shown
    if source.startswith("Valid gap list"):
        assert shown.startswith("Valid gap IDs for this session:\n")
    if tier == "session":
        assert (
            "---\nExample from this session (Round 2):\nThis output successfully "
            "addressed GAP-FLOW-001 and was approved by Reviewer.\n---\n## Gap Resolution"
        ) in shown


def test_template_tier_is_the_fallback(tmp_path: Path) -> None:
    copy = tmp_path / "pack"
    shutil.copytree(REPO / "rules" / "gap-review", copy)
    (copy / "examples" / "engineer.md").write_text("")  # no canonical example
    pack = engine.load_pack(copy)
    chosen = choose("WRONG_FORMAT", BASE_CONTEXT, pack.model.examples, pack.root)
    assert (chosen.tier, chosen.source) == (
        "template",
        "Structural template - follow this format exactly",
    )
    assert chosen.text.startswith("## Gap Resolution: [GAP-ID]")


def test_canonical_example_from_a_spec_document(tmp_path: Path) -> None:
    spec = tmp_path / "source.md"
    spec.write_text(
        "# Spec\n## 7. Examples\n#### Engineer example\nThe engineer writes:\n"
        "```markdown\n## Gap Resolution: GAP-AB-001\n**Confidence:** HIGH\n```\n"
        "#### Reviewer example\n```markdown\n## Review: x\n```\n# Appendix\n"
    )
    chosen = choose("EMPTY_OUTPUT", {**BASE_CONTEXT, "spec_path": str(spec)})
    assert chosen.tier == "canonical"
    assert chosen.text == "## Gap Resolution: GAP-AB-001\n**Confidence:** HIGH\n"
    missing = {**BASE_CONTEXT, "spec_path": str(tmp_path / "nope.md")}
    fallback = choose("EMPTY_OUTPUT", missing)  # seed 000 Example 4: the next source
    assert fallback.text.startswith("## Gap Resolution: GAP-XXX")  # the pack's own file
    assert fallback.warnings == (
        f"context key 'spec_path': cannot read {tmp_path / 'nope.md'}; "
        "the next example source was used",
    )


def test_an_unreadable_example_source_is_a_warning_in_the_ledger(tmp_path: Path) -> None:
    out = tmp_path / "engineer.md"
    out.write_text("")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text(
        f"known_gaps: [GAP-FLOW-001]\nround: 2\nspec_path: {tmp_path / 'gone.md'}\n"
        "original_prompt: Do the work.\n"
    )
    common = ("--pack", "gap-review", "--block", "engineer", "--context", str(ctx))
    session_dir = str(tmp_path / "s")
    assert run_cli("eval", *common, "--session", session_dir, str(out)).exit_code == 3
    shown = run_cli("render", *common, "--session", session_dir, str(out))
    assert shown.exit_code == 0, shown.output
    assert "RETRY ATTEMPT 2 of 3" in shown.stdout
    assert "warning: context key 'spec_path': cannot read" in shown.stderr
    rows = json.loads(run_cli("log", "--session", session_dir, "--format", "json").stdout)
    assert len(rows) == 1 and any("gone.md" in w for w in rows[0]["warnings"])


# ------------------------------------------------------------------ session examples


def test_rolled_back_and_unvalidated_rounds_are_skipped(tmp_path: Path) -> None:
    root = session(
        tmp_path,
        {
            1: proposal(["GAP-FLOW-001"]),
            2: proposal(["GAP-FLOW-001"]),
            3: proposal(["GAP-FLOW-002"]),
        },
    )
    (root / "round_003" / "ROLLED_BACK").write_text("")
    context = {**BASE_CONTEXT, "session_dir": str(root)}
    assert choose("NO_GAPS_ADDRESSED", context).round == 2
    assert choose("NO_GAPS_ADDRESSED", {**context, "rolled_back_rounds": [2]}).round == 1
    assert choose("NO_GAPS_ADDRESSED", {**context, "validated_rounds": [1]}).round == 1


def test_higher_score_wins_and_recency_breaks_ties(tmp_path: Path) -> None:
    rich = proposal(GAPS)  # two gap refs: 4 points for NO_GAPS_ADDRESSED
    poor = proposal(["GAP-FLOW-001"])  # one gap ref: 2 points
    context = {**BASE_CONTEXT, "session_dir": str(session(tmp_path, {1: rich, 2: poor, 3: poor}))}
    assert choose("NO_GAPS_ADDRESSED", context).round == 1
    tied = {**BASE_CONTEXT, "session_dir": str(session(tmp_path / "b", {1: poor, 2: poor}))}
    assert choose("NO_GAPS_ADDRESSED", tied).round == 2
    accepted = {**context, "accepted_gaps": ["GAP-FLOW-002"]}
    assert choose("NO_GAPS_ADDRESSED", accepted).round == 1


# ------------------------------------------------------------------ budgets and truncation


def test_fifty_thousand_char_session_example_is_cut_structurally(
    tmp_path: Path, snapshot: SnapshotAssertion
) -> None:
    big = (
        "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n"
        "### Examples\n" + "e" * 20_000 + "\n\n"
        "### Proposed Solution\nFirst paragraph of the solution.\n\n" + "p" * 3_000 + "\n\n"
        "### Trade-offs\n" + "t" * 20_000 + "\n\n### New Gaps Introduced\nNone\n"
    )
    big += "\n\n### Appendix\n" + "z" * (50_000 - len(big))
    assert len(big) >= 50_000
    context = {**BASE_CONTEXT, "session_dir": str(session(tmp_path, {3: big}))}
    prompt = prompt_for("NO_GAPS_ADDRESSED", context)
    example = prompt.split("Source: Example showing gap references in context\n", 1)[1]
    example = example.split("\n\n═", 1)[0].split("\n", 2)[2]
    assert len(example) <= 8000
    assert example.startswith("---\nExample from this session (Round 3):\n")
    order = [
        example.find(h) for h in ("## Gap Resolution", "### Proposed Solution", "### Trade-offs")
    ]
    assert -1 not in order and order == sorted(order)
    assert "p" * 3_000 in example  # Proposed Solution fits whole
    assert "### Examples" not in example  # lower priority than the section that overflowed
    assert example.rstrip().endswith("[...]")  # Trade-offs overflowed: abbreviated
    assert prompt == snapshot


@pytest.mark.parametrize("size", [10, 7_999, 8_000, 8_001, 30_000, 200_000])
def test_examples_never_exceed_their_budget(size: int) -> None:
    text = "## Gap Resolution: GAP-FLOW-001\n" + "a" * size
    cut, truncated = truncate_example(
        text, 8000, EXAMPLES.priority_sections, EXAMPLES.truncation_notice
    )
    assert len(cut) <= 8000
    assert truncated == (len(text) > 8000)
    unstructured, _ = truncate_example(
        "z" * size, 8000, EXAMPLES.priority_sections, EXAMPLES.truncation_notice
    )
    assert len(unstructured) <= 8000
    if size > 8000:
        assert unstructured.endswith("[Example truncated for length]")


# ------------------------------------------------------------------ policy is data


def copy_pack(tmp_path: Path) -> Path:
    copy = tmp_path / "gap-review"
    shutil.copytree(REPO / "rules" / "gap-review", copy)
    return copy


def edit(pack: Path, old: str, new: str) -> None:
    path = pack / "pack.yaml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def test_selection_order_in_a_copy(tmp_path: Path) -> None:
    copy = copy_pack(tmp_path)
    edit(
        copy,
        "    WRONG_FORMAT:\n      - {tier: canonical, source: Canonical example - note "
        "required headers}\n",
        "    WRONG_FORMAT:\n",
    )
    pack = engine.load_pack(copy)
    assert choose("WRONG_FORMAT", BASE_CONTEXT).tier == "canonical"
    assert choose("WRONG_FORMAT", BASE_CONTEXT, pack.model.examples, pack.root).tier == "template"


def test_scoring_weight_in_a_copy(tmp_path: Path) -> None:
    rich, poor = proposal(GAPS), proposal(["GAP-FLOW-001"])
    context = {**BASE_CONTEXT, "session_dir": str(session(tmp_path, {1: rich, 2: poor}))}
    assert choose("NO_GAPS_ADDRESSED", context).round == 1
    copy = copy_pack(tmp_path)
    edit(copy, "per_id: gap, points: 2, max: 10", "per_id: gap, points: 0, max: 10")
    pack = engine.load_pack(copy)
    assert choose("NO_GAPS_ADDRESSED", context, pack.model.examples, pack.root).round == 2


def test_budget_in_a_copy(tmp_path: Path) -> None:
    context = {
        **BASE_CONTEXT,
        "session_dir": str(session(tmp_path, {3: proposal(["GAP-FLOW-001"], " Words." * 300)})),
    }
    full = prompt_for("NO_GAPS_ADDRESSED", context)
    copy = copy_pack(tmp_path)
    edit(copy, "retry_tokens: 2000", "retry_tokens: 100")
    small = prompt_for("NO_GAPS_ADDRESSED", context, engine.load_pack(copy))
    example = small.split("───\n\n", 1)[1].split("\n\n═", 1)[0]
    assert len(example) <= 400
    assert len(small) < len(full)


# ------------------------------------------------------------------ exhaustion


def test_escalation_menu_after_two_retries(snapshot: SnapshotAssertion) -> None:
    prompt = prompt_for("WRONG_FORMAT", {**BASE_CONTEXT, "round": 7}, attempt=3)
    assert "Choose an option (1-5): ___" in prompt
    assert prompt == snapshot


def test_a_failure_that_is_not_retriable_returns_the_error_not_the_menu(tmp_path: Path) -> None:
    """Seed 003 §8: EXECUTION_FAILED is declared `retriable: false`; at attempt 1 the round
    FAILED with the error as its details (RoundResult(status="FAILED", details=...)), no
    escalation menu and no choice pending; the menu stays for exhausted retries."""
    out = tmp_path / "engineer.md"
    out.write_text("")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text("known_gaps: [GAP-FLOW-001]\nround: 3\noriginal_prompt: Do the work.\n")
    session = tmp_path / "session"
    common = ("--pack", "gap-review", "--block", "engineer", "--context", str(ctx))
    failure = ("--error", "Task tool failed to spawn instance", "--failure-type")
    decided = run_cli(
        "eval", *common, "--session", str(session), *failure, "EXECUTION_FAILED",
        "--format", "json", str(out),
    )  # fmt: skip
    assert decided.exit_code == 1, decided.output
    evaluation = json.loads(decided.stdout)
    decision = evaluation["decision"]
    assert (decision["action"], decision["rule"], decision["attempt"]) == (
        "FAILED",
        "not-retriable",
        1,
    )
    assert decision["reason"] == "EXECUTION_FAILED is not retriable"
    assert decision["template"] is None
    assert evaluation["verdict"]["failures"][0]["message"] == "Task tool failed to spawn instance"
    shown = run_cli("render", *common, *failure, "EXECUTION_FAILED", str(out))
    assert shown.exit_code == 1
    assert shown.stdout == ""
    assert shown.stderr == (
        "error: no prompt is due: the decision is FAILED (EXECUTION_FAILED is not "
        "retriable: Task tool failed to spawn instance)\n"
    )
    chosen = run_cli("choose", "--session", str(session), "engineer@3", "1")
    assert chosen.exit_code != 0
    assert "no choice is pending for engineer@3: its last decision is FAILED" in chosen.output
    retried = run_cli("eval", *common, *failure, "WRONG_FORMAT", "--format", "json", str(out))
    assert json.loads(retried.stdout)["decision"]["action"] == "RETRY"  # retriable: retried


def test_a_not_retriable_failure_without_a_policy_ends_as_after_failure_without_its_menu(
    tmp_path: Path,
) -> None:
    """A trigger without `on_not_retriable:` ends with its after-failure action, but never
    renders the after-failure template (the menu of exhausted retries)."""
    copy = copy_pack(tmp_path)
    edit(copy, "    on_not_retriable: FAILED   # seed 003", "    # seed 003")
    out = tmp_path / "engineer.md"
    out.write_text("")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text("known_gaps: [GAP-FLOW-001]\nround: 3\noriginal_prompt: Do the work.\n")
    common = ("--pack", str(copy), "--block", "engineer", "--context", str(ctx))
    failure = ("--error", "crashed", "--failure-type", "EXECUTION_FAILED")
    decided = run_cli("eval", *common, *failure, "--format", "json", str(out))
    decision = json.loads(decided.stdout)["decision"]
    assert (decision["action"], decision["rule"], decision["template"]) == (
        "ESCALATE",
        "not-retriable",
        None,
    )
    shown = run_cli("render", *common, *failure, str(out))
    assert shown.exit_code == 1 and "Choose an option" not in shown.output


def test_render_cli_with_context_file(tmp_path: Path) -> None:
    bad = tmp_path / "engineer.md"
    bad.write_text("# no headers\n")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text("known_gaps: [GAP-FLOW-001]\nround: 2\noriginal_prompt: Do the work.\n")
    result = run_cli(
        "render",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(ctx),
        "--attempt",
        "2",
        str(bad),
    )
    assert result.exit_code == 0, result.output
    assert "RETRY ATTEMPT 3 of 3" in result.stdout
    assert result.stdout.endswith("\n\nDo the work.")


def test_template_fallback_prompt(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    context = {**BASE_CONTEXT, "session_dir": str(tmp_path / "empty-session")}
    prompt = prompt_for("INCONSISTENT_REFS", context)
    assert "Source: Valid gap list + template\n" in prompt
    assert "## Gap Resolution: [GAP-ID]" in prompt
    assert prompt == snapshot


def test_rounds_the_ledger_did_not_accept_are_skipped(tmp_path: Path) -> None:
    from engine.session.next_prompt import ledger_accepted_rounds
    from engine.session.recording import Session

    root = session(tmp_path, {2: proposal(["GAP-FLOW-001"]), 3: proposal(["GAP-FLOW-002"])})
    context = {**BASE_CONTEXT, "session_dir": str(root)}
    accepted = ledger_accepted_rounds(PACK, "engineer", context)
    assert accepted is None
    assert choose("NO_GAPS_ADDRESSED", context, accepted=accepted).round == 3  # no ledger yet
    with Session(PACK, root) as ledger_session:
        for n in (2, 3):
            text = (root / f"round_{n:03d}" / "engineer.md").read_text()
            ledger_session.evaluate(
                OutputInput(
                    "engineer",
                    text if n == 2 else "# rejected\n",
                    context={"known_gaps": GAPS, "round": n},
                )
            )
    accepted = ledger_accepted_rounds(PACK, "engineer", context)
    assert choose("NO_GAPS_ADDRESSED", context, accepted=accepted).round == 2
    # the plain Pack API reads no ledger; a session passes the rounds it accepted
    assert "(Round 3)" in retry_prompt(context, accepted=None)
    assert "(Round 2)" in retry_prompt(context, accepted=accepted)


def retry_prompt(context: dict[str, Any], accepted: Any) -> str:
    text = FAILING["NO_GAPS_ADDRESSED"] or ""
    verdict = PACK.evaluate("engineer", text, context=context)
    decision = PACK.decide(verdict, output=text, context=context)
    rendered: str = PACK.render(
        verdict, decision, output=text, context=context, accepted_rounds=accepted
    )
    return rendered


# ------------------------------------------------------- tier 2 from a session's ledger


def _round_three_prompt(session: Any, rounds: dict[int, str], context: dict[str, Any]) -> Any:
    """Rounds 1.. accepted in ``session``, then round 3's output fails NO_GAPS_ADDRESSED:
    the retry prompt rendered for it."""
    for n, text in rounds.items():
        outcome = session.evaluate(
            OutputInput(
                "engineer", text, context={**context, "round": n}, path=f"round_{n:03d}/engineer.md"
            )
        )
        assert outcome.verdict.status != "fail", outcome.verdict.error
    failing = FAILING["NO_GAPS_ADDRESSED"]
    third = {**context, "round": 3, "expected_path": "round_003/engineer.md"}
    given = OutputInput("engineer", failing, context=third, path="round_003/engineer.md")
    outcome = session.evaluate(given)
    assert outcome.verdict.failure_type == "NO_GAPS_ADDRESSED"
    return session.render_prompt(outcome.verdict, outcome.decision, given)


def test_tier_two_of_a_session_in_a_ledger_reads_its_kept_accepted_outputs(
    tmp_path: Path, ledger_url: str
) -> None:
    """Round 3's tier-2 prompt is the same, byte for byte, whether the earlier rounds are
    files in a session folder (with its ledger) or kept outputs of a session in a ledger."""
    from engine.session.recording import Session

    rounds = {1: proposal(["GAP-FLOW-001"]), 2: proposal(["GAP-FLOW-002"], " Clearly.")}
    context = {k: v for k, v in BASE_CONTEXT.items() if k != "round"}
    root = session(tmp_path, rounds)
    with Session(PACK, root) as in_folder:
        from_folder = _round_three_prompt(in_folder, rounds, {**context, "session_dir": str(root)})
    with Session(PACK, "gap-review", ledger=ledger_url, keep_outputs=True) as in_ledger:
        from_ledger = _round_three_prompt(in_ledger, rounds, context)
    assert from_folder.example_tier == from_ledger.example_tier == "session"
    assert "Example from this session (Round 2)" in from_ledger.text
    assert from_ledger.text.encode() == from_folder.text.encode()
    # without kept outputs a session in a ledger has no earlier round to show
    with Session(PACK, "bare", ledger=ledger_url) as bare:
        assert _round_three_prompt(bare, rounds, context).example_tier != "session"
