"""Structural and content checks of free-form (markdown) outputs, declared in packs.

Tier 1 (structure) runs first; tier 2 (content) runs only when structure passes. Within a
tier the first failing error-level check wins; warning-level checks never fail, they are
collected. Each check kind is one small function, registered by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.contracts.kind import EvaluationInput, no_parser_error
from engine.errors import ContextError
from engine.format.model import (
    AnyOfCheck,
    MarkdownContract,
    MinRefsCheck,
    NonEmptyCheck,
    PresentCheck,
    RefsExistCheck,
    RequireTextCheck,
    SectionCharsCheck,
    declared_default_failures,
)
from engine.patterns import compile_pattern
from engine.placeholders import fill, render_list
from engine.results import Failure, ParseResult
from engine.verdict import Verdict, verdict_from_checks

if TYPE_CHECKING:
    from pathlib import Path

    from engine.format.loader import KeyPath
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker

DEFAULT_MESSAGES = {
    "present": "Expected file not found: {path}",
    "non_empty": "output is empty",
    "require_text": "Missing required text: '{text}'",
    "any_of": "Missing one of: {any}",
    "min_refs": "expected at least {min} {ids} reference(s), found {count}",
    "refs_exist": "Invalid {ids} references: {invalid}",
    "min_section_chars": "{id} section is thin ({len} chars)",
}


@dataclass
class Output:
    """What is checked: the text (None when the file is missing), its path, the context."""

    text: str | None
    path: str | None
    context: Mapping[str, Any]
    ids: dict[str, list[str]] = field(default_factory=dict)


Finding = tuple[str, dict[str, Any]]  # a message template code or text, and its values


def extract_ids(text: str, pattern: str) -> list[str]:
    """Distinct matches of ``pattern``, sorted."""
    return sorted({m.group(0) for m in compile_pattern(pattern).finditer(text)})


def section_of(text: str, heading: str, ident: str) -> str | None:
    """The text after ``heading`` + whitespace + ``ident``, up to the next ``\\n## ``."""
    start = 0
    while True:
        index = text.find(heading, start)
        if index < 0:
            return None
        after = index + len(heading)
        while after < len(text) and text[after].isspace():
            after += 1
        if text.startswith(ident, after):
            body_start = after + len(ident)
            end = text.find("\n## ", body_start)
            return text[body_start:].strip() if end < 0 else text[body_start:end].strip()
        start = index + 1


def _present(check: PresentCheck, out: Output) -> list[dict[str, Any]]:
    return [{"path": out.path}] if out.text is None else []


def _non_empty(check: NonEmptyCheck, out: Output) -> list[dict[str, Any]]:
    return [{}] if not (out.text or "").strip() else []


def _require_text(check: RequireTextCheck, out: Output) -> list[dict[str, Any]]:
    return [] if check.text in (out.text or "") else [{"text": check.text}]


def _any_of(check: AnyOfCheck, out: Output) -> list[dict[str, Any]]:
    text = out.text or ""
    return [] if any(t in text for t in check.any) else [{"any": ", ".join(check.any)}]


def _min_refs(check: MinRefsCheck, out: Output) -> list[dict[str, Any]]:
    count = len(out.ids.get(check.ids, []))
    return [{"min": check.min, "count": count, "ids": check.ids}] if count < check.min else []


def _refs_exist(check: RefsExistCheck, out: Output) -> list[dict[str, Any]]:
    if check.known not in out.context:
        raise ContextError(f"context key {check.known!r} is needed to check {check.ids} "
                           "references; give it with --context or --var")
    known = {str(k) for k in out.context[check.known] or []}
    invalid = [i for i in out.ids.get(check.ids, []) if i not in known]
    return [{"invalid": render_list(invalid), "invalid_ids": invalid, "ids": check.ids}] \
        if invalid else []


def _section_chars(check: SectionCharsCheck, out: Output) -> list[dict[str, Any]]:
    found = []
    for ident in out.ids.get(check.ids, []):
        section = section_of(out.text or "", check.heading, ident)
        if section and len(section) < check.min:
            found.append({"id": ident, "len": len(section), "min": check.min})
    return found


CHECKS: dict[type, Callable[[Any, Output], list[dict[str, Any]]]] = {
    PresentCheck: _present,
    NonEmptyCheck: _non_empty,
    RequireTextCheck: _require_text,
    AnyOfCheck: _any_of,
    MinRefsCheck: _min_refs,
    RefsExistCheck: _refs_exist,
    SectionCharsCheck: _section_chars,
}


@dataclass
class CheckOutcome:
    failures: list[Failure]
    warnings: list[str]
    data: dict[str, Any]


def run_checks(contract: MarkdownContract, out: Output) -> CheckOutcome:
    """Run the contract's checks tier by tier; the first error stops, warnings collect."""
    text = out.text or ""
    out.ids = {name: extract_ids(text, kind.pattern) for name, kind in contract.ids.items()}
    warnings: list[str] = []
    for tier in ("structure", "content"):
        for check in contract.checks:
            if check.tier != tier:
                continue
            for values in CHECKS[type(check)](check, out):
                message = fill(check.message or DEFAULT_MESSAGES[check.check], values)
                if check.level == "warning":
                    warnings.append(message)
                else:
                    data = {"ids": out.ids, "invalid_ids": values.get("invalid_ids", [])}
                    return CheckOutcome([Failure(check.fail, message)], warnings, data)
    return CheckOutcome([], warnings, {"ids": out.ids})


@dataclass(frozen=True)
class CompiledMarkdown:
    """A markdown contract ready to check outputs."""

    name: str
    contract: MarkdownContract = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    param_names: frozenset[str] = frozenset()

    @property
    def id_patterns(self) -> Mapping[str, str]:
        return {name: kind.pattern for name, kind in self.contract.ids.items()}

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        raise no_parser_error(self.name, "markdown")

    def evaluate(self, output: EvaluationInput) -> Verdict:
        outcome = run_checks(self.contract, Output(output.text, output.path, output.context))
        return verdict_from_checks(self.name, outcome.failures, outcome.warnings,
                                   outcome.data, dict(self.severities))

    def failure_tier(self, failure_type: str) -> str:
        for check in self.contract.checks:
            if check.fail == failure_type and check.level == "error":
                return check.tier
        return "structure"


class MarkdownKind:
    name = "markdown"

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        return declared_default_failures(contract)

    def check(self, name: str, contract: Any, checker: PackChecker) -> None:
        """Everything a markdown contract refers to is checked by the generic walk."""

    def compile(self, name: str, contract: MarkdownContract, pack: Rulepack,
                folder_of: Callable[[KeyPath], Path]) -> CompiledMarkdown:
        for kind in contract.ids.values():
            compile_pattern(kind.pattern)
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledMarkdown(name, contract, severities)


KIND = MarkdownKind()
