"""Decisions of the sentinel pack's trigger table (seed 002) and the repair prompt."""

from __future__ import annotations

from sentinel_cases import NONCE, delimiters

from conftest import shipped_pack
from engine.core.verdict import verdict_from_parse
from engine.policy.triggers.decide import decide

PACK = shipped_pack("sentinel")
SEVERITIES = {name: ft.severity for name, ft in PACK.model.failure_types.items()}


def evaluate(block: str, text: str, attempt: int = 1, **params: str):  # type: ignore[no-untyped-def]
    verdict = verdict_from_parse(
        block, PACK.parse(block, text, nonce=NONCE, vars=params), SEVERITIES
    )
    return verdict, decide(PACK.model, verdict, output=text, attempt=attempt)


def bad(block: str, filler: str = "x" * 60) -> str:
    opener, closer = delimiters(block)
    return "\n".join([opener, f"JUNK LINE {filler}", closer])


def test_table_rows_after_the_one_repair() -> None:
    outcomes = {}
    for block in ("PLAN", "TRACK", "SPEC", "VERDICT", "REFLECT", "QA_REVIEW"):
        _, first = evaluate(block, bad(block), criterion="AC1")
        _, second = evaluate(block, bad(block), attempt=2, criterion="AC1")
        outcomes[block] = (first.action, second.action)
    assert outcomes == {
        "PLAN": ("REPAIR", "CYCLE_FAIL"),
        "TRACK": ("REPAIR", "CYCLE_FAIL"),
        "SPEC": ("REPAIR", "CYCLE_FAIL"),
        "VERDICT": ("REPAIR", "NEEDS_HUMAN"),
        "REFLECT": ("REPAIR", "DEGRADE"),
        "QA_REVIEW": ("REPAIR", "ACCEPT_WITH_WARNINGS"),
    }
    _, degraded = evaluate("REFLECT", bad("REFLECT"), attempt=2)
    assert degraded.default == {"action": "NOP"}
    assert degraded.log == "warning"


def test_guards() -> None:
    _, short = evaluate("VERDICT", "Sure, here it is:", criterion="AC1")
    assert (short.action, short.rule) == ("NEEDS_HUMAN", "guard:short_output")
    # a short output that still carries the answer is worth a retry (issue 36)
    for answer in ("The change is not valid.", "ANSWER=YES"):
        _, carried = evaluate("VERDICT", answer, criterion="AC1")
        assert (carried.action, carried.rule) == ("REPAIR", "attempt:1")


def test_repair_prompt_for_a_20000_char_verdict() -> None:
    text = ("a" * 10_000) + "“quoted”" + ("b" * 9_992)
    verdict, decision = evaluate("VERDICT", text, criterion="AC1")
    assert decision.action == "REPAIR"
    prompt = PACK.render(verdict, decision, output=text, nonce=NONCE, vars={"criterion": "AC1"})
    expected_original = "a" * 4000 + "[...truncated...]" + "b" * 4000
    # no part of a block was found: the prompt is a retry that shows what the output said
    assert "had no VERDICT block:\n" in prompt
    assert "```\nexpected exactly 1 <<<VERDICT: block, found 0\n```\n" in prompt
    assert f"```\n{expected_original}\n```\n" in prompt.split("It said:\n", 1)[1]
    assert "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=NO\n" in prompt  # the example
