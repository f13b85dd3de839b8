"""A loaded pack is compiled once: deciding and rendering compile nothing and read no file
of the pack (session example files, outside the pack, may still be read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sentinel_cases import NONCE

import engine
from conftest import shipped_pack
from engine.sandbox.environment import ENVIRONMENT

RULES = Path(engine.__file__).resolve().parent.parent / "rules"
SENTINEL = shipped_pack("sentinel")
GAP_REVIEW = shipped_pack("gap-review")
GAP_CONTEXT: dict[str, Any] = {
    "known_gaps": ["GAP-FLOW-001"],
    "round": 2,
    "original_prompt": "Write round 2.",
    "expected_path": "round_002/engineer.md",
}


@pytest.fixture
def pack_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Files read under rules/ while the test runs; compiling anything fails the test."""
    reads: list[Path] = []
    real_read_text = Path.read_text

    def read_text(self: Path, *args: Any, **kwargs: Any) -> str:
        if RULES in self.resolve().parents:
            reads.append(self)
        return real_read_text(self, *args, **kwargs)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("compiled at decide/render time")

    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setattr(ENVIRONMENT, "from_string", refuse)
    monkeypatch.setattr(ENVIRONMENT, "compile_expression", refuse)
    return reads


def test_sentinel_decide_and_repair_prompt(pack_reads: list[Path]) -> None:
    pack = SENTINEL
    text = "x" * 80 + "\nANSWER=YES\n"
    verdict = pack.evaluate("VERDICT", text, nonce=NONCE, vars={"criterion": "AC1"})
    decision = pack.decide(verdict, output=text, nonce=NONCE)
    assert decision.action == "REPAIR"
    prompt = pack.render(verdict, decision, output=text, nonce=NONCE, vars={"criterion": "AC1"})
    assert "FORMAT" in prompt
    assert pack_reads == []


@pytest.mark.parametrize(
    ("text", "attempt"),
    [
        ("# no headers\n", 1),  # canonical example, file
        ("## Gap Resolution: GAP-FLOW-404\n\n**Confidence:** LOW\n", 1),  # template tier
        ("# no headers\n", 3),  # escalation
    ],
)
def test_gap_review_retry_and_escalation(pack_reads: list[Path], text: str, attempt: int) -> None:
    pack = GAP_REVIEW
    verdict = pack.evaluate("engineer", text, context=GAP_CONTEXT)
    decision = pack.decide(verdict, output=text, attempt=attempt, context=GAP_CONTEXT)
    assert decision.template is not None
    assert pack.render(verdict, decision, output=text, context=GAP_CONTEXT)
    assert pack_reads == []


def test_files_a_base_pack_names_are_read_from_its_folder(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text("rulepack: mine\nextends: [builtin:gap-review]\n")
    pack = engine.load_pack(tmp_path)
    text = "# no headers\n"
    verdict = pack.evaluate("engineer", text, context=GAP_CONTEXT)
    decision = pack.decide(verdict, output=text, context=GAP_CONTEXT)
    rendered = pack.render_prompt(verdict, decision, output=text, context=GAP_CONTEXT)
    assert rendered.example_tier == "canonical"
    assert (
        rendered.text
        == GAP_REVIEW.render_prompt(verdict, decision, output=text, context=GAP_CONTEXT).text
    )
