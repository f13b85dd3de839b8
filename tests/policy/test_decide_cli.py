"""`rules eval`, `rules render` and `rules explain` on the sentinel pack (seed 002)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from sentinel_cases import BASES, NONCE, delimiters
from syrupy.assertion import SnapshotAssertion

from conftest import REPO, PackMaker, run_cli

VERDICT_SCHEMA = json.loads((REPO / "contracts" / "verdict.schema.json").read_text())
DECISION_SCHEMA = json.loads((REPO / "contracts" / "decision.schema.json").read_text())


def output_of(block: str, kind: str, nonce: str = NONCE) -> str:
    opener, closer = delimiters(block, nonce=nonce)
    if kind == "valid":
        return "\n".join([opener, *BASES[block], closer]) + "\n"
    if kind == "junk":
        return "\n".join([opener, "this is not a field line at all, it is prose", closer]) + "\n"
    return "ANSWER=YES\n"


def eval_args(
    block: str, *, nonce: str = NONCE, attempt: int = 1, extra: tuple[str, ...] = ()
) -> list[str]:
    args = ["--pack", "sentinel", "--block", block, "--nonce", nonce, "--attempt", str(attempt)]
    if block == "VERDICT":
        args += ["--var", "criterion=AC1"]
    return [*args, *extra]


SENTINEL_TESTS = REPO / "rules" / "sentinel" / "tests"
P10 = yaml.safe_load((SENTINEL_TESTS / "p10.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", P10, ids=[c["name"] for c in P10])
def test_the_packs_own_cases_through_rules_eval(case: dict[str, Any]) -> None:
    """The sentinel pack's own test cases (seed 002's table) give the same decision through
    `rules eval`, with JSON that fits the published schemas and the action's exit code."""
    if "input" in case:
        text = case["input"]
    else:
        text = (SENTINEL_TESTS / case["input_file"]).read_text(encoding="utf-8")
    extra: tuple[str, ...] = ("--model", "m-1", "--format", "json")
    if "error" in case:
        extra += ("--error", case["error"])
    result = run_cli(
        "eval",
        *eval_args(case["block"], nonce=case["nonce"], attempt=case.get("attempt", 1), extra=extra),
        input=text,
    )
    payload = json.loads(result.stdout)
    jsonschema.validate(payload["verdict"], VERDICT_SCHEMA)
    jsonschema.validate(payload["decision"], DECISION_SCHEMA)
    decision = payload["decision"]
    expect = case["expect"]
    assert decision["action"] == expect["action"]
    assert decision["rule"] == expect.get("rule", decision["rule"])
    assert result.exit_code == decision["exit_code"] == ACTION_EXITS[expect["action"]]
    if decision["action"] == "REPAIR":
        assert decision["carry"] == {"nonce": case["nonce"], "model": "m-1"}


ACTION_EXITS = {"PROCEED": 0, "REPAIR": 3, "CYCLE_FAIL": 1, "NEEDS_HUMAN": 1, "DEGRADE": 0}
ACTION_EXITS["ACCEPT_WITH_WARNINGS"] = 0


def test_the_shipped_packs_pass_their_own_tests() -> None:
    result = run_cli("test", str(REPO / "rules"), "--format", "json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, [
        case for pack in report["packs"] for case in pack["cases"] if not case["passed"]
    ]
    counts = {pack["pack"]: len(pack["cases"]) for pack in report["packs"]}
    assert counts["sentinel"] >= 30 and counts["gap-review"] >= 10
    assert counts["quality-gate"] >= 4


def test_text_table_and_exit_statuses() -> None:
    result = run_cli("eval", *eval_args("VERDICT"), input=output_of("VERDICT", "junk"))
    assert result.exit_code == 3
    lines = result.stdout.splitlines()
    assert lines[0] == "block    VERDICT"
    assert "action   REPAIR (attempt 1 of 2; 0 repairs left after this one)" in lines
    assert run_cli("eval", *eval_args("NOPE"), input="").exit_code == 2
    assert (
        run_cli("eval", *eval_args("PLAN", extra=("--context", "missing.yaml")), input="").exit_code
        == 2
    )


def test_context_file_errors_name_the_place(tmp_path: Path) -> None:
    context = tmp_path / "ctx.yaml"
    context.write_text("a: 1\na: 2\n")
    result = run_cli("eval", *eval_args("PLAN", extra=("--context", str(context))), input="x")
    assert result.exit_code == 2
    assert "ctx.yaml:2:1: duplicate key 'a'" in result.stderr


def test_render_prints_the_prompt_or_says_none_is_due() -> None:
    due = run_cli("render", *eval_args("PLAN"), input=output_of("PLAN", "junk"))
    assert due.exit_code == 0
    assert due.stdout.startswith("IDENTITY\n")
    none = run_cli("render", *eval_args("PLAN"), input=output_of("PLAN", "valid"))
    assert none.exit_code == 1
    assert none.stderr == (
        "error: no prompt is due: the decision is PROCEED (the output meets its contract)\n"
    )


def render(block: str, text: str, **params: str) -> str:
    extra = tuple(a for k, v in params.items() for a in ("--var", f"{k}={v}"))
    args = ["--pack", "sentinel", "--block", block, "--nonce", NONCE, *extra]
    result = run_cli("render", *args, input=text)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("block", list(BASES))
def test_repair_prompt_per_block(block: str, snapshot: SnapshotAssertion, tmp_path: Path) -> None:
    params = {"criterion": "AC1"} if block == "VERDICT" else {}
    pack = "sentinel"
    result = run_cli(
        "render",
        "--pack",
        pack,
        "--block",
        block,
        "--nonce",
        NONCE,
        *(a for k, v in params.items() for a in ("--var", f"{k}={v}")),
        input=output_of(block, "junk"),
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == snapshot


def test_plan_contract_text_agrees_with_the_repair_checklist() -> None:
    """Seed 002's checklist says never to escape quotes and to avoid backslashes; the
    contract text the same prompt carries must not teach the model to write \\" instead."""
    prompt = render("PLAN", output_of("PLAN", "junk"))
    contract = prompt.split("FORMAT CONTRACT", 1)[1]
    assert "PLAN" in contract
    assert '\\"' not in contract and "\\\\" not in contract
    assert "avoid backslashes entirely" in contract
    assert "Do not escape quotes." in prompt and "Avoid backslashes entirely." in prompt


def test_repair_prompt_20000_chars_is_head_marker_tail(snapshot: SnapshotAssertion) -> None:
    text = "<" + "a" * 9_999 + "“middle”" + "b" * 9_992
    prompt = render("VERDICT", text, criterion="AC1")
    said = prompt.split("It said:\n", 1)[1]  # no block found: a retry (issue 36)
    said = said.split("\n\nFORMAT CONTRACT", 1)[0]
    _, opener, fenced = said.split("\n", 2)  # the line saying it is data, the fence
    original = fenced.removesuffix("\n" + opener)
    assert original == text[:4000] + "[...truncated...]" + text[-4000:]
    assert len(original) == 4000 + len("[...truncated...]") + 4000
    assert prompt == snapshot


def test_micro_hint_line_disappears_when_empty(snapshot: SnapshotAssertion) -> None:
    opener, closer = delimiters("VERDICT")
    no_hint = "\n".join([opener, "answer=YES", 'REASON="the reason is long enough"', closer])
    prompt = render("VERDICT", no_hint, criterion="AC1")
    assert "line 2: unrecognized line content\n```\n\nORIGINAL OUTPUT" in prompt
    assert prompt == snapshot(name="empty hint")
    hinted = no_hint.replace("answer=YES", 'ANSWER="YES"')
    prompt = render("VERDICT", hinted, criterion="AC1")
    assert (
        "line 2: ANSWER must be unquoted\n```\n\nRemove the quotes around ANSWER.\n\n"
        "ORIGINAL OUTPUT"
    ) in prompt
    assert prompt == snapshot(name="with hint")


def test_curly_quotes_become_ascii(snapshot: SnapshotAssertion) -> None:
    opener, closer = delimiters("VERDICT", criterion="AC7")
    text = "\n".join([opener, "ANSWER=YES", "REASON=“curly” and ‘single’", closer])
    prompt = render("VERDICT", text, criterion="AC7")
    assert "REASON=\"curly\" and 'single'" in prompt
    assert "“" not in prompt.split("FORMAT CONTRACT")[0]
    assert "- Criterion ID (if VERDICT): AC7\n" in prompt
    assert "<<<VERDICT:V1:AC7:NONCE=4F2C9A>>>" in prompt.split("FORMAT CONTRACT")[1]
    assert prompt == snapshot


def test_explain_prints_the_trigger_table(snapshot: SnapshotAssertion) -> None:
    result = run_cli("explain", "--pack", "sentinel")
    assert result.exit_code == 0
    assert result.stdout == snapshot
    one = run_cli("explain", "--pack", "sentinel", "REFLECT")
    assert "| REFLECT " in one.stdout and "| PLAN " not in one.stdout


# ------------------------------------------------------------------ policy is data


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    return copy


def edit(pack: Path, old: str, new: str, count: int = 1) -> None:
    path = pack / "pack.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, count), encoding="utf-8")


def decide_with(
    pack: Path | str, block: str, text: str, attempt: int = 1, *extra: str
) -> dict[str, Any]:
    args = [
        "--pack",
        str(pack),
        "--block",
        block,
        "--nonce",
        NONCE,
        "--attempt",
        str(attempt),
        "--format",
        "json",
        *extra,
    ]
    if block == "VERDICT":
        args += ["--var", "criterion=AC1"]
    result = run_cli("eval", *args, input=text)
    assert result.exit_code in (0, 1, 3), result.output
    decision: dict[str, Any] = json.loads(result.stdout)["decision"]
    return decision


def test_max_attempts_in_a_copy(pack_copy: Path) -> None:
    junk = output_of("PLAN", "junk")
    assert decide_with("sentinel", "PLAN", junk, 2)["action"] == "CYCLE_FAIL"
    edit(pack_copy, "    max_attempts: 1\n", "    max_attempts: 2\n")
    assert decide_with(pack_copy, "PLAN", junk, 2)["action"] == "REPAIR"
    assert decide_with(pack_copy, "PLAN", junk, 3)["action"] == "CYCLE_FAIL"


def test_guard_threshold_in_a_copy(pack_copy: Path) -> None:
    junk = output_of("PLAN", "junk")
    assert len(junk) < 200
    assert decide_with("sentinel", "PLAN", junk)["action"] == "REPAIR"
    edit(pack_copy, "output | length < 50", "output | length < 200")
    decision = decide_with(pack_copy, "PLAN", junk)
    assert (decision["action"], decision["rule"]) == ("CYCLE_FAIL", "guard:short_output")


def test_after_failure_action_in_a_copy(pack_copy: Path) -> None:
    junk = output_of("VERDICT", "junk")
    edit(pack_copy, "after_failure: {action: NEEDS_HUMAN,", "after_failure: {action: ESCALATE,")
    assert decide_with(pack_copy, "VERDICT", junk, 2)["action"] == "ESCALATE"


def test_micro_hint_in_a_copy(pack_copy: Path) -> None:
    opener, closer = delimiters("VERDICT")
    text = "\n".join([opener, 'ANSWER="YES"', 'REASON="a long enough reason here"', closer])
    edit(
        pack_copy,
        'hint: "Remove the quotes around ANSWER."',
        'hint: "Write ANSWER=YES or ANSWER=NO, bare."',
    )
    result = run_cli(
        "render",
        "--pack",
        str(pack_copy),
        "--block",
        "VERDICT",
        "--nonce",
        NONCE,
        "--var",
        "criterion=AC1",
        input=text,
    )
    assert "\n\nWrite ANSWER=YES or ANSWER=NO, bare.\n\n" in result.stdout


def test_repeated_error_stops_early(pack_copy: Path) -> None:
    junk = output_of("PLAN", "junk")
    edit(pack_copy, "    max_attempts: 1\n", "    max_attempts: 3\n    stop_on_repeat: true\n")
    first = decide_with(pack_copy, "PLAN", junk, 1)
    assert first["action"] == "REPAIR"
    error = "line 2: unrecognized line content"
    again = decide_with(pack_copy, "PLAN", junk, 2, "--previous-error", error)
    assert (again["action"], again["rule"]) == ("CYCLE_FAIL", "repeat")
    other = decide_with(pack_copy, "PLAN", junk, 2, "--previous-error", "something else")
    assert other["action"] == "REPAIR"


def test_policy_changes_with_the_attempt_number(pack_copy: Path) -> None:
    edit(
        pack_copy,
        "    max_attempts: 1\n    template: format_repair\n",
        "    max_attempts: 2\n    template: format_repair\n    attempts:\n"
        "      - {attempt: 1, action: REPAIR, hint: true}\n"
        "      - {attempt: 2, action: RETRY, template: format_repair, hint: false}\n",
    )
    junk = output_of("PLAN", "junk")
    assert decide_with(pack_copy, "PLAN", junk, 1)["action"] == "REPAIR"
    second = decide_with(pack_copy, "PLAN", junk, 2)
    assert (second["action"], second["exit_code"], second["attempts_left"]) == ("RETRY", 3, 0)
    assert decide_with(pack_copy, "PLAN", junk, 3)["action"] == "CYCLE_FAIL"


def test_explain_patterns_names_the_engine_of_each_pack_pattern(make_pack: PackMaker) -> None:
    folder = make_pack("""
        rulepack: t
        extends: [builtin:core]
        contracts:
          doc:
            kind: markdown
            ids:
              safe: {pattern: 'ID-[0-9]{3}'}
              nested: {pattern: '(a+)+b'}
        """)
    result = run_cli("explain", "--pack", str(folder), "--patterns")
    assert result.exit_code == 0, result.output
    rows = {
        cells[1]: cells
        for cells in (
            [c.strip() for c in line.strip("|").split("|")]
            for line in result.stdout.splitlines()[2:]
        )
    }
    assert rows["contracts.doc.ids.safe.pattern"][:3] == [
        "ID-[0-9]{3}",
        "contracts.doc.ids.safe.pattern",
        "re",
    ]
    assert rows["contracts.doc.ids.nested.pattern"][:3] == [
        "(a+)+b",
        "contracts.doc.ids.nested.pattern",
        "re2",
    ]


def test_explain_of_an_unknown_block_is_a_usage_error() -> None:
    result = run_cli("explain", "--pack", "sentinel", "NOPE")
    assert result.exit_code == 2
    assert "has no block 'NOPE'" in result.output
