"""`kind: text` contracts: bounds on size and lines, required and forbidden patterns, with
the pack's messages."""

from __future__ import annotations

import engine
from conftest import FIXTURES

PACK = engine.load_pack(FIXTURES / "packs" / "json_text")


def verdict(block: str, text: str) -> tuple[str, list[tuple[str, str, int | None]]]:
    result = PACK.evaluate(block, text)
    return result.status, [(f.type, f.message, f.line) for f in result.failures]


def test_text_bounds_and_patterns_with_pack_messages() -> None:
    assert PACK.evaluate("summary", "Summary: all good\n").status == "pass"
    assert verdict("summary", "a\nb\nc\nd\nTODO") == (
        "fail",
        [
            ("WRONG_FORMAT", "keep it to 3 lines, not 5", None),
            ("WRONG_FORMAT", "start with 'Summary:'", None),
            ("EMPTY_OUTPUT", "output must not match TODO (found 'TODO')", None),
        ],
    )
    assert verdict("summary", "Summary:")[1] == [
        ("WRONG_FORMAT", "output has 8 characters (at least 10)", None)
    ]
