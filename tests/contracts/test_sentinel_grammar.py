"""The sentinel pack reproduces SENTINEL_GRAMMARS.md: every check, message and output."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sentinel_cases import CASES, NONCE, build_text, call_args, delimiters, expand, load

from conftest import shipped_pack

PACK = shipped_pack("sentinel")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    result = PACK.parse(case["block"], build_text(case), **call_args(case))
    if "error" in case:
        assert not result.ok
        assert result.error == expand(case["error"])
        assert result.failure is not None
        assert result.failure.type == case.get("failure", "PARSE_ERROR")
        return
    assert result.ok, result.error
    if "data" in case:
        assert result.data == expand(case["data"])
    if "warnings" in case:
        assert result.warnings == case["warnings"]


def test_every_catalogue_message_is_produced_by_a_case() -> None:
    produced = [expand(c["error"]) for c in CASES if "error" in c]
    produced += [w for c in CASES for w in c.get("warnings", [])]
    missing = []
    for template in load("sentinel_catalogue.yaml"):
        pattern = re.escape(template)
        pattern = re.sub(r"<<<<(\w+)>", "<<<.+", pattern) if "<<<<" in template else pattern
        pattern = re.sub(r"<[A-Za-z]+>", ".*", pattern)
        if not any(re.fullmatch(pattern, message, re.S) for message in produced):
            missing.append(template)
    assert missing == []


def _padded_verdict(size: int) -> str:
    lines = ["ANSWER=YES", 'REASON="ok"']
    base = len("\n".join(lines))
    lines += [""] * (size - base)  # each blank line adds one LF to the payload size
    opener, closer = delimiters("VERDICT")
    return "\n".join([opener, *lines, closer])


def test_payload_of_exactly_the_cap_is_accepted_and_one_more_is_not() -> None:
    ok = PACK.parse("VERDICT", _padded_verdict(16000), nonce=NONCE, vars={"criterion": "AC1"})
    assert ok.ok, ok.error
    over = PACK.parse("VERDICT", _padded_verdict(16001), nonce=NONCE, vars={"criterion": "AC1"})
    assert over.error == "block content exceeds 16000 chars (16001)"


def test_size_cap_is_measured_after_cr_removal() -> None:
    text = _padded_verdict(16000).replace("\n", "\r\n")
    assert PACK.parse("VERDICT", text, nonce=NONCE, vars={"criterion": "AC1"}).ok


def test_cr_only_text_has_no_lines() -> None:
    text = _padded_verdict(10).replace("\n", "\r")
    result = PACK.parse("VERDICT", text, nonce=NONCE, vars={"criterion": "AC1"})
    # the opener runs on into the payload on what is now one line: named as a near miss
    assert result.error == (
        "expected exactly 1 <<<VERDICT: block, found 0; line 1 nearly matches the opener "
        "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>: `>>>ANS` where it should be `>>>`"
    )
