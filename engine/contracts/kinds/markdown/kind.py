"""Structural and content checks of free-form (markdown) outputs, declared in packs.

Tier 1 (structure) runs first; tier 2 (content) runs only when structure passes. Within a
tier the first failing error-level check wins; warning-level checks never fail, they are
collected. Each check kind is one small function, registered by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.contracts.kind import EvaluationInput, StandaloneKind, WithoutParser
from engine.contracts.kinds.markdown.model import (
    AnyOfCheck,
    CoverageCheck,
    MarkdownContract,
    MinRefsCheck,
    NonEmptyCheck,
    PresentCheck,
    RefsExistCheck,
    RequireTextCheck,
    SectionCharsCheck,
    SectionsCheck,
    SimilarPosition,
)
from engine.contracts.kinds.markdown.sections import (
    GROUP,
    MAX_SECTIONS,
    Section,
    find_sections,
    group_count,
    keywords,
    section_of,
    soft_match,
)
from engine.core.errors import ConditionError, ContextError
from engine.core.patterns import compile_pattern, extract_ids
from engine.core.placeholders import fill, render_list
from engine.core.results import Failure
from engine.core.textio import EMPTY_OUTPUT, output_problem
from engine.core.verdict import Verdict, verdict_from_checks
from engine.format.findings import FindingRule
from engine.sandbox.environment import compile_condition

if TYPE_CHECKING:
    from pathlib import Path

    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


NO_CAPTURE_GROUP = FindingRule(
    "no-capture-group",
    "An id pattern has no capture group where one is needed.",
    "Add a group around the id.",
)

UNKNOWN_GROUP = FindingRule(
    "unknown-group",
    "A template names a capture group the pattern does not have.",
    "Use {1}..{N} for the pattern's groups.",
)

UNKNOWN_SECTIONS = FindingRule(
    "unknown-sections",
    "A coverage check names no sections check.",
    "Name a `check: sections` of the same contract.",
)

DEFAULT_MESSAGES = {
    "present": "Expected file not found: {path}",
    "non_empty": "output is empty",
    "require_text": "Missing required text: '{text}'",
    "any_of": "Missing one of: {any}",
    "min_refs": "expected at least {min} {ids} reference(s), found {count}",
    "refs_exist": "Invalid {ids} references: {invalid}",
    "min_section_chars": "{id} section is thin ({len} chars)",
    "sections": "{id} is not in {known}",
    "marker": "section {id} is missing '{text}'",
    "coverage": "no reference to {id}",
}

# Keys of the values a check function returns that override the check's own settings.
FAIL, MESSAGE, LEVEL = "_fail", "_message", "_level"


@dataclass
class Output:
    """What is checked: the text (None when the file is missing), its path, the context."""

    text: str | None
    path: str | None
    context: Mapping[str, Any]
    ids: dict[str, list[str]] = field(default_factory=dict)
    sections: dict[str, list[Section]] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


def _item_id(item: Any, key: str | None) -> str:
    if isinstance(item, Mapping):
        return str(item.get(key or "id", ""))
    return str(item)


def _context_list(out: Output, key: str) -> list[Any]:
    value = out.context.get(key)
    return list(value) if isinstance(value, list | tuple) else []


Finding = tuple[str, dict[str, Any]]  # a message template code or text, and its values


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
        raise ContextError(
            f"context key {check.known!r} is needed to check {check.ids} "
            "references; give it with --context or --var"
        )
    known = {str(k) for k in out.context[check.known] or []}
    invalid = [i for i in out.ids.get(check.ids, []) if i not in known]
    return (
        [{"invalid": render_list(invalid), "invalid_ids": invalid, "ids": check.ids}]
        if invalid
        else []
    )


def _section_chars(check: SectionCharsCheck, out: Output) -> list[dict[str, Any]]:
    found = []
    for ident in out.ids.get(check.ids, []):
        section = section_of(out.text or "", check.heading, ident)
        if section and len(section) < check.min:
            found.append({"id": ident, "len": len(section), "min": check.min})
    return found


def _sections(check: SectionsCheck, out: Output) -> list[dict[str, Any]]:
    sections = out.sections.get(check.name, [])
    if len(sections) > MAX_SECTIONS:
        message = (
            f"more than {MAX_SECTIONS} {check.name} sections: over the engine's limit of "
            f"{MAX_SECTIONS} sections for one sections check (MAX_SECTIONS)"
        )
        return [{FAIL: check.fail, MESSAGE: message, LEVEL: "error"}]
    if sections and check.known is not None and check.known not in out.context:
        raise ContextError(
            f"context key {check.known!r} is needed to check the "
            f"{check.name} sections; give it with --context or --var"
        )
    known = (
        {_item_id(i, check.known_key) for i in _context_list(out, check.known)}
        if check.known is not None
        else set()
    )
    if sections:  # no key without sections: packs without them give the data they gave
        out.data[check.name] = [
            {
                "id": s.id,
                **{name: _field(s.text, pattern) for name, pattern in check.fields.items()},
            }
            for s in sections
        ]
    found: list[dict[str, Any]] = []
    decided = check.decided
    decided_items = (
        [i for i in _context_list(out, decided.items) if isinstance(i, Mapping)]
        if decided is not None and decided.items in out.context
        else []
    )
    decided_ids = {str(i.get(decided.key)) for i in decided_items} if decided else set()
    for section in sections:
        if check.known is not None and section.id not in known:
            found.append({"id": section.id, "known": check.known})
        if decided is not None and section.id in decided_ids:
            found.append({"id": section.id, FAIL: decided.fail, MESSAGE: decided.message})
        for marker in check.markers:
            if marker.text not in section.text:
                found.append(
                    {
                        "id": section.id,
                        "text": marker.text,
                        FAIL: marker.fail,
                        MESSAGE: marker.message or DEFAULT_MESSAGES["marker"],
                    }
                )
    if decided is not None and decided.similar is not None:
        found.extend(_similar(decided.similar, decided_items, out.text or ""))
    return found


def _similar(
    rule: SimilarPosition, items: list[Mapping[str, Any]], text: str
) -> list[dict[str, Any]]:
    """Warnings for decided items whose rejected position the text seems to propose again."""
    found: list[dict[str, Any]] = []
    if not items:
        return found
    words = keywords(text, rule.stop_words)
    for item in items:
        if rule.unless is not None and item.get(rule.unless.key) in rule.unless.in_:
            continue
        wanted = keywords(str(item.get(rule.field) or ""), rule.stop_words)
        if wanted and len(wanted & words) / len(wanted) >= rule.ratio:
            values = {k: v for k, v in item.items() if isinstance(k, str)}
            found.append({**values, LEVEL: "warning", MESSAGE: rule.message})
    return found


def _field(text: str, pattern: str) -> str | None:
    match = compile_pattern(pattern).search(text)
    if match is None:
        return None
    value = match.group(1) if match.groups() else match.group(0)
    return None if value is None else " ".join(str(value).split())  # one line


def _where(check: CoverageCheck, item: Any, context: Mapping[str, Any]) -> bool:
    if check.where is None:
        return True
    if not isinstance(check.where, str):  # an ItemWhere
        return isinstance(item, Mapping) and item.get(check.where.key) in check.where.in_
    try:
        return bool(compile_condition(check.where)(item=item, context=context))
    except ConditionError as exc:
        raise ContextError(
            f"condition {check.where!r} on an item of {check.items!r} "
            f"failed: {exc.reason}; check the items' keys"
        ) from None


MAX_COVERAGE_WORK = 2_000_000_000
"""The most characters one coverage check may search (each item is looked for in the whole
output, so the work is items x output size): over it the check fails before searching, in
well under a second, instead of taking minutes on a large output and a large context."""


def _coverage(check: CoverageCheck, out: Output) -> list[dict[str, Any]]:
    text = out.text or ""
    in_sections = {s.id for name in check.sections for s in out.sections.get(name, [])}
    found: list[dict[str, Any]] = []
    covered: list[dict[str, Any]] = []
    soft = check.soft
    text_words: list[set[str]] = []

    def words() -> set[str]:
        if not text_words:
            text_words.append(keywords(text, soft.stop_words if soft else ()))
        return text_words[0]

    items = [item for item in _context_list(out, check.items) if _where(check, item, out.context)]
    searches = len(items) * (len(check.referenced_by) + (2 if soft is not None else 0))
    if searches * len(text) > MAX_COVERAGE_WORK:
        message = (
            f"{len(items)} {check.items} items searched for in {len(text)} characters: over "
            f"the engine's limit of {MAX_COVERAGE_WORK} characters searched by one coverage "
            "check (MAX_COVERAGE_WORK)"
        )
        return [{FAIL: check.fail, MESSAGE: message, LEVEL: "error"}]
    for item in items:
        ident = _item_id(item, check.key)
        values = (
            {k: v for k, v in item.items() if isinstance(k, str)}
            if isinstance(item, Mapping)
            else {}
        )
        values["id"] = ident
        if ident in in_sections or any(fill(t, values) in text for t in check.referenced_by):
            covered.append({"id": ident, "match": "explicit"})
        elif check.soft is not None and soft_match(text, item, check.soft, words):
            covered.append(
                {
                    "id": ident,
                    "match": "soft",
                    "confidence": check.soft.confidence,
                    "reason": check.soft.reason,
                }
            )
            if check.soft.effect == "warn":
                found.append(
                    {
                        **values,
                        LEVEL: "warning",
                        MESSAGE: check.soft.message
                        or check.message
                        or DEFAULT_MESSAGES["coverage"],
                    }
                )
        else:
            covered.append({"id": ident, "match": "none"})
            found.append(values)
    if check.name is not None and covered:
        out.data[check.name] = covered
    return found


# By the value of a check's `check:` key (what tells the models of checks apart): the checks
# of a pack read back from its image are plain records, not instances of these models.
CHECKS: dict[str, Callable[[Any, Output], list[dict[str, Any]]]] = {
    "present": _present,
    "non_empty": _non_empty,
    "require_text": _require_text,
    "any_of": _any_of,
    "min_refs": _min_refs,
    "refs_exist": _refs_exist,
    "min_section_chars": _section_chars,
    "sections": _sections,
    "coverage": _coverage,
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
    out.sections = {
        check.name: find_sections(text, check)
        for check in contract.checks
        if check.check == "sections"
    }
    warnings: list[str] = []
    for tier in ("structure", "content"):
        for check in contract.checks:
            if check.tier != tier:
                continue
            for values in CHECKS[check.check](check, out):
                template = values.get(MESSAGE) or check.message or DEFAULT_MESSAGES[check.check]
                message = fill(template, values)
                if values.get(LEVEL, check.level) == "warning":
                    warnings.append(message)
                else:
                    data = {
                        "ids": out.ids,
                        "invalid_ids": values.get("invalid_ids", []),
                        **out.data,
                    }
                    return CheckOutcome(
                        [Failure(values.get(FAIL, check.fail), message)], warnings, data
                    )
    return CheckOutcome([], warnings, {"ids": out.ids, **out.data})


@dataclass(frozen=True)
class CompiledMarkdown(WithoutParser):
    """A markdown contract ready to check outputs."""

    name: str
    contract: MarkdownContract = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    param_names: frozenset[str] = frozenset()

    @property
    def id_patterns(self) -> Mapping[str, str]:
        return {name: kind.pattern for name, kind in self.contract.ids.items()}

    @property
    def checks_empty(self) -> bool:
        """The contract has a ``non_empty`` check of its own (with its failure and message)."""
        return any(check.check == "non_empty" for check in self.contract.checks)

    def evaluate(self, output: EvaluationInput) -> Verdict:
        problem = None if output.text is None else output_problem(output.text)
        # an empty output goes to the contract's own `non_empty` check when it has one
        if problem is not None and not (problem[0] == EMPTY_OUTPUT and self.checks_empty):
            failure = Failure(*problem)
            return verdict_from_checks(self.name, [failure], [], None, dict(self.severities))
        outcome = run_checks(self.contract, Output(output.text, output.path, output.context))
        return verdict_from_checks(
            self.name, outcome.failures, outcome.warnings, outcome.data, dict(self.severities)
        )

    def failure_tier(self, failure_type: str) -> str:
        for check in self.contract.checks:
            if check.fail == failure_type and check.level == "error":
                return check.tier
        return "structure"


class MarkdownKind(StandaloneKind):
    name = "markdown"
    model = MarkdownContract

    def check(self, name: str, contract: MarkdownContract, checker: PackChecker) -> None:
        """References are checked by the generic walk; here what links checks together:
        a section id's capture groups, a field's capture group, a coverage check's
        sections."""
        named = {c.name: c for c in contract.checks if isinstance(c, SectionsCheck)}
        for index, check in enumerate(contract.checks):
            path = ("contracts", name, "checks", index)
            if isinstance(check, SectionsCheck):
                self._check_sections(check, path, checker)
            elif isinstance(check, CoverageCheck):
                for position, section in enumerate(check.sections):
                    if section not in named:
                        checker.add(
                            UNKNOWN_SECTIONS,
                            f"no sections check is named {section!r}",
                            (*path, "sections", position),
                            f"sections checks of this contract: {', '.join(named) or 'none'}",
                        )

    @staticmethod
    def _check_sections(check: SectionsCheck, path: KeyPath, checker: PackChecker) -> None:
        groups = group_count(check.heading)
        if groups is None:
            return  # the generic walk reports the pattern
        for number in sorted({int(n) for n in GROUP.findall(check.id)}):
            if number > groups:
                checker.add(
                    UNKNOWN_GROUP,
                    f"id {check.id!r} uses group {{{number}}} but "
                    f"the heading pattern has {groups} capture group(s)",
                    (*path, "id"),
                    "add a capture group to `heading` or use {0}",
                )
        for field_name, pattern in check.fields.items():
            if group_count(pattern) == 0:
                checker.add(
                    NO_CAPTURE_GROUP,
                    f"field {field_name!r}: pattern "
                    f"{pattern!r} has no capture group, the whole match is kept",
                    (*path, "fields", field_name),
                    "wrap the value in ( ) to keep only it",
                    level="warning",
                )

    def compile(
        self,
        name: str,
        contract: MarkdownContract,
        pack: Rulepack,
        folder_of: Callable[[KeyPath], Path],
    ) -> CompiledMarkdown:
        for kind in contract.ids.values():
            compile_pattern(kind.pattern)
        for check in contract.checks:
            if check.check == "sections":
                for pattern in (check.heading, *check.fields.values()):
                    compile_pattern(pattern)
            elif check.check == "coverage" and isinstance(check.where, str):
                compile_condition(check.where)
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledMarkdown(name, contract, severities)


KIND = MarkdownKind()
