"""Diagnostics and repair prompts for outputs a real model wrote (issue 36).

The outputs are SmolLM2-135M-Instruct's, kept by ``benchmarks/repair_yield.py --fixtures``
(tests/fixtures/real_model/<run>/outputs.jsonl: one JSON line per attempt). Each case picks
one output by block, task, loop and attempt, checks the message the engine gives for it, and
pins the prompt the engine sends back (a syrupy snapshot: the golden file of that prompt).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

import engine
from conftest import REPO, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "real_model"

# The first prompt of the benchmark's VERDICT task AC1 (its task, for the repair prompt).
VERDICT_TASK = """\
Decide whether this acceptance criterion holds.
Criterion AC1: The sum of 2 and 2 is 4.

Answer with exactly one VERDICT block and nothing else:
<<<VERDICT:V1:AC1:NONCE=1A2B3C>>>
ANSWER=<YES|NO>
REASON="<one line>"
<<<END_VERDICT:AC1:NONCE=1A2B3C>>>
"""


@cache
def outputs(run: str) -> list[dict[str, Any]]:
    path = FIXTURES / run / "outputs.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def output(run: str, block: str, task: str, loop: str, attempt: int) -> str:
    for record in outputs(run):
        if (record["block"], record["task"], record["loop"], record["attempt"]) == (
            block,
            task,
            loop,
            attempt,
        ):
            return str(record["output"])
    raise LookupError(f"no output {block} {task} {loop} {attempt} in run {run}")


def repair_prompt(
    pack: Any, block: str, text: str, nonce: str | None, vars: dict[str, str], task: str
) -> tuple[str, str]:
    """The error the engine reports for ``text`` and the prompt it sends back."""
    context = {"task": task}
    verdict = pack.evaluate(block, text, nonce=nonce, vars=vars or None, context=context)
    decision = pack.decide(verdict, output=text, nonce=nonce, context=context)
    assert decision.action == "REPAIR", (decision.action, verdict.error)
    prompt = pack.render(
        verdict, decision, output=text, nonce=nonce, vars=vars or None, context=context
    )
    return verdict.error or "", prompt


@pytest.fixture(scope="module")
def sentinel() -> Any:
    return engine.load_pack("sentinel")


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The pack `rules init --kind json` makes, as the benchmark's JSON block uses it."""
    parent = tmp_path_factory.mktemp("init")
    result = run_cli("init", "answers", "--kind", "json", "--dir", str(parent))
    assert result.exit_code == 0, result.output
    return engine.load_pack(str(parent / "answers"))


def test_an_opener_with_two_closing_brackets_is_named(
    sentinel: Any, snapshot: SnapshotAssertion
) -> None:
    """41 of the issue's 79 outputs wrote the opener with `>>`; this one then ran the whole
    block into that line."""
    text = output("before", "sentinel VERDICT", "AC1", "engine", 1)
    assert text.startswith("<<<VERDICT:V1:AC1:NONCE=1A2B3C>><<<END_VERDICT")
    error, prompt = repair_prompt(
        sentinel, "VERDICT", text, "1A2B3C", {"criterion": "AC1"}, VERDICT_TASK
    )
    assert error == (
        "expected exactly 1 <<<VERDICT: block, found 0; line 1 nearly matches the opener "
        "<<<VERDICT:V1:AC1:NONCE=1A2B3C>>>: `C>><<<E` where it should be `C>>>`"
    )
    # a repair of the near miss: the task, the hint for the line, the example
    assert "THE TASK THE BLOCK ANSWERS (your first prompt)\n" + VERDICT_TASK in prompt
    assert "Write that line exactly as the contract writes it" in prompt
    assert 'REASON="The log shows two failing tests' in prompt
    assert prompt == snapshot


def test_an_output_that_starts_with_a_closer_is_named(
    sentinel: Any, snapshot: SnapshotAssertion
) -> None:
    text = output("before", "sentinel VERDICT", "AC1", "baseline", 2)
    assert text.startswith("<<<END_VERDICT:AC1:NONCE=1A2B3C>>")
    error, prompt = repair_prompt(
        sentinel, "VERDICT", text, "1A2B3C", {"criterion": "AC1"}, VERDICT_TASK
    )
    assert error.startswith(
        "expected exactly 1 <<<VERDICT: block, found 0; line 1 nearly matches the opener "
        "<<<VERDICT:V1:AC1:NONCE=1A2B3C>>>: `<<<END_VER` where it should be `<<<VER`"
    )
    assert prompt == snapshot


def test_a_plan_run_into_one_line_is_named(sentinel: Any) -> None:
    text = output("before", "sentinel PLAN", "T1", "engine", 2)
    verdict = sentinel.evaluate("PLAN", text, nonce="1A2B3C")
    assert verdict.error == (
        "expected exactly 1 <<<PLAN: block, found 0; line 1 nearly matches the opener "
        "<<<PLAN:V1:NONCE=1A2B3C>>>: `C>><<<E` where it should be `C>>>`"
    )


def test_prose_without_json_says_no_json_found(answers: Any, snapshot: SnapshotAssertion) -> None:
    text = output("before", "init json ANSWER", "Q1", "engine", 2)
    assert text.startswith("```python")
    error, prompt = repair_prompt(answers, "ANSWER", text, None, {}, "Is Tokyo in Japan?")
    assert error == "no JSON found: the output is text, with no JSON object or array in it"
    assert prompt.startswith("Is Tokyo in Japan?\n\nYour previous ANSWER output broke")
    assert prompt.endswith('Write only your JSON object for the question "Is Tokyo in Japan?":\n')
    assert prompt == snapshot


def test_json_with_text_around_it_is_named(answers: Any, snapshot: SnapshotAssertion) -> None:
    """The first prompt of the rules init pack, with the task, got a JSON object wrapped in
    prose (run after-step3): the decoder's complaint about the prose misled."""
    text = output("after-step3", "init json ANSWER", "Q1", "engine", 1)
    assert text.startswith('"One JSON object:\n{')
    error, prompt = repair_prompt(answers, "ANSWER", text, None, {}, "Is Tokyo in Japan?")
    assert error == (
        "line 2 column 1: the JSON object that starts here has text around it: write only "
        "the JSON object, with nothing before or after it"
    )
    assert prompt == snapshot


def test_a_string_for_an_object_is_a_sentence(answers: Any, snapshot: SnapshotAssertion) -> None:
    text = output("before", "init json ANSWER", "Q1", "engine", 1)
    assert text == '"Yes"'
    error, prompt = repair_prompt(answers, "ANSWER", text, None, {}, "Is Tokyo in Japan?")
    assert error == "the document is a string: it must be an object"
    assert '{"decision": "NO", "reason": "The log shows two failing tests"}' in prompt
    assert prompt == snapshot


def test_the_json_repair_that_the_model_answered_with_a_passing_object(
    answers: Any, snapshot: SnapshotAssertion
) -> None:
    """Run 2026-12-08: the model answered "Is 2 + 2 equal to 5?" with prose; the repair
    restates the contract's sentence before the example, and the model's next output (also
    kept) passes. The generic re-ask of the same run got the same prose back."""
    text = output("2026-12-08", "init json ANSWER", "Q2", "engine", 1)
    assert text == "2 + 2 = 5"
    error, prompt = repair_prompt(answers, "ANSWER", text, None, {}, "Is 2 + 2 equal to 5?")
    assert error == "no JSON found: the output is text, with no JSON object or array in it"
    assert '"decision", in capital letters, "YES" or "NO"' in prompt
    assert prompt == snapshot
    repaired = output("2026-12-08", "init json ANSWER", "Q2", "engine", 2)
    verdict = answers.evaluate("ANSWER", repaired, context={"task": "Is 2 + 2 equal to 5?"})
    assert (verdict.status, verdict.data["decision"]) == ("pass", "NO")
    assert output("2026-12-08", "init json ANSWER", "Q2", "baseline", 2) == text


def test_a_raw_line_break_in_a_string_is_said_whole(answers: Any) -> None:
    """The issue's own real output (its run, before the benchmark kept fixtures)."""
    text = '"Yes, Tokyo is Japan.\nThe capital of Japan is Tokyo."'
    verdict = answers.evaluate("ANSWER", text)
    assert verdict.error == (
        "line 1 column 22: invalid control character (a line break) inside a string: "
        "write it \\n or leave it out"
    )
    assert answers.evaluate("ANSWER", "2 + 2 = 5").error == (
        "no JSON found: the output is text, with no JSON object or array in it"
    )


def test_a_copied_placeholder_fails(answers: Any, sentinel: Any) -> None:
    """7 of the issue's 20 JSON outputs copied the contract's placeholder and passed."""
    verdict = answers.evaluate("ANSWER", '{"decision": "YES", "reason": "<one line>"}')
    assert verdict.status == "fail"
    assert verdict.error == (
        "`reason` is still the placeholder `<one line>`: write the reason itself"
    )
    block = (
        '<<<VERDICT:V1:AC1:NONCE=1A2B3C>>>\nANSWER=<YES|NO>\nREASON="<one line>"\n'
        "<<<END_VERDICT:AC1:NONCE=1A2B3C>>>\n"
    )
    verdict = sentinel.evaluate("VERDICT", block, nonce="1A2B3C", vars={"criterion": "AC1"})
    assert verdict.error == "ANSWER is still the placeholder <YES|NO>: write the ANSWER itself"


def test_the_first_prompt_of_an_init_pack_carries_no_authoring_note(tmp_path: Path) -> None:
    result = run_cli("init", "answers", "--kind", "json", "--dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    first = (tmp_path / "answers" / "templates" / "first.md.j2").read_text(encoding="utf-8")
    assert "add it here" not in first
    assert first.startswith("{{ task | trim }}\n")


def test_a_closer_before_any_opener_is_named(sentinel: Any) -> None:
    """The closer written first, and no opener line after it (nor one that nearly is)."""
    text = '<<<END_VERDICT:AC1:NONCE=1A2B3C>>>\nANSWER=YES\nREASON="2 + 2 is 4"\n'
    verdict = sentinel.evaluate("VERDICT", text, nonce="1A2B3C", vars={"criterion": "AC1"})
    assert verdict.error == (
        "expected exactly 1 <<<VERDICT: block, found 0; line 1 is the closer, but no opener "
        "<<<VERDICT:V1:AC1:NONCE=1A2B3C>>> comes before it"
    )
