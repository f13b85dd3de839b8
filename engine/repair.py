"""Rendering the repair prompt a decision calls for (sandboxed Jinja2)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from engine.decide import Decision
from engine.errors import RenderError
from engine.grammar.messages import fill
from engine.model import Rulepack, Truncation
from engine.patterns import compile_pattern
from engine.render import ENVIRONMENT
from engine.verdict import Verdict

_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‟": '"', "«": '"', "»": '"',
                         "″": '"', "‘": "'", "’": "'", "‚": "'", "‛": "'"})


def normalize(text: str, steps: list[str]) -> str:
    for step in steps:
        if step == "ascii_quotes":
            text = text.translate(_QUOTES)
        elif step == "strip_bom":
            text = text.lstrip("\ufeff")
        elif step == "crlf":
            text = text.replace("\r\n", "\n")
    return text


def truncate(text: str, spec: Truncation) -> str:
    if spec.strategy == "none" or len(text) <= spec.max_chars:
        return text
    if spec.strategy == "head":
        return text[: spec.max_chars] + spec.marker
    return text[: spec.head] + spec.marker + text[len(text) - spec.tail:]


def micro_hint(pack: Rulepack, block: str, error: str) -> str:
    for hint in pack.hints:
        if hint.blocks and block not in hint.blocks:
            continue
        if compile_pattern(hint.match).search(error) is not None:
            return hint.hint
    return ""


def render_repair(pack: Rulepack, root: Path, verdict: Verdict, decision: Decision, *,
                  output: str, nonce: str, params: Mapping[str, str]) -> str:
    """The prompt for a REPAIR/RETRY decision; RenderError when none is due."""
    if decision.final or decision.template is None:
        raise RenderError(f"no prompt is due: the decision is {decision.action}")
    trigger = pack.triggers[verdict.block]
    spec = pack.templates[decision.template]
    if spec.purpose != "repair":
        raise RenderError(f"template {decision.template!r} is a {spec.purpose} template; "
                          "only repair templates render here so far")
    contract = pack.contracts[verdict.block]
    contract_text = ""
    if contract.contract_text:
        raw = (root / contract.contract_text).read_text(encoding="utf-8")
        contract_text = fill(raw, {"nonce": nonce, **params})
    # Trailing line breaks are not content; dropping them keeps the template's layout exact.
    original = truncate(normalize(output, list(trigger.normalize)).rstrip("\r\n"),
                        trigger.truncate)
    template = ENVIRONMENT.from_string((root / spec.file).read_text(encoding="utf-8"))
    return template.render(
        block_type=verdict.block, nonce=nonce, parser_error=verdict.error or "",
        micro_hint=micro_hint(pack, verdict.block, verdict.error or "") if decision.hint else "",
        original_output=original, format_contract=contract_text.rstrip("\n"),
        failure_type=verdict.failure_type or "", attempt=decision.attempt,
        max_attempts=decision.max_attempts, params=dict(params), context={},
    )
