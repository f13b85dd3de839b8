"""Conflicts between an output and the items of a context list, as the pack declares them.

A conflict is a plain mapping: ``ref`` (the item's id), ``type`` (``explicit``: a section of
the output matched the item; ``implicit``: the item went unaddressed), ``severity``,
``round``, ``number`` (the trailing digits of the id, for ordering) and ``fields`` (named by
the pack: from the context item and from the matched section). Everything here is pure:
which conflicts a verdict holds, the options a conflict gets, the priority order, and what
the open conflicts do to a termination state. Recording them is engine.session.conflicts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.patterns import compile_pattern
from engine.core.placeholders import fill
from engine.sandbox.environment import compile_condition

if TYPE_CHECKING:
    from engine.core.errors import Locate
    from engine.format.model import Rulepack
    from engine.format.section import Compiling
    from engine.policy.conflicts.model import ConflictRules

EXPLICIT = "explicit"
IMPLICIT = "implicit"

_NUMBER = re.compile(r"(\d+)\D*$")
_DIGITS = re.compile(r"\d+")


def number_of(ref: str) -> int:
    """The last run of digits of an id (``ID-R5-003`` -> 3), 0 when it has none."""
    match = _NUMBER.search(ref)
    return int(match.group(1)) if match else 0


@dataclass(frozen=True)
class Termination:
    """What the open conflicts do to one termination state."""

    state: str
    outcome: str  # "allowed" | "blocked" | "warn"
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class CompiledConflicts:
    """A pack's conflict rules with their conditions compiled once."""

    spec: ConflictRules
    when: tuple[Callable[..., Any] | None, ...]
    recommended: tuple[Callable[..., Any] | None, ...]

    # ------------------------------------------------------------------ from a verdict

    def from_verdict(
        self, data: Any, context: Mapping[str, Any], round_number: int | None
    ) -> list[dict[str, Any]]:
        """The explicit conflicts and the implicit flags a verdict's data holds."""
        spec = self.spec
        if not isinstance(data, Mapping):
            return []
        items = context.get(spec.items)
        by_id: dict[str, Mapping[str, Any]] = {}
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping) and item.get(spec.item_id) is not None:
                by_id.setdefault(str(item[spec.item_id]), item)
        out: list[dict[str, Any]] = []
        for section in _entries(data.get(spec.explicit)):
            ref = str(section.get("id", ""))
            if ref in by_id:
                out.append(self._conflict(ref, EXPLICIT, by_id[ref], section, round_number))
        if spec.implicit is not None:
            for flag in _entries(data.get(spec.implicit)):
                ref = str(flag.get("id", ""))
                if flag.get("match") == "none" and ref in by_id:
                    out.append(self._conflict(ref, IMPLICIT, by_id[ref], {}, round_number))
        return out

    def _conflict(
        self,
        ref: str,
        kind: str,
        item: Mapping[str, Any],
        section: Mapping[str, Any],
        round_number: int | None,
    ) -> dict[str, Any]:
        spec = self.spec
        fields: dict[str, Any] = {name: item.get(key) for name, key in spec.item_fields.items()}
        fields.update({name: section.get(key) for name, key in spec.section_fields.items()})
        return {
            "ref": ref,
            "type": kind,
            "severity": str(item.get(spec.severity) or ""),
            "round": round_number,
            "number": number_of(ref),
            "fields": fields,
        }

    # ------------------------------------------------------------------ options

    def synthesis_for(self, conflict: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first synthesis rule whose field contains one of its words, filled in."""
        values = _values(conflict)
        for rule in self.spec.synthesis:
            text = str(values.get(rule.field) or "").lower()
            if any(word.lower() in text for word in rule.contains):
                return {
                    "proposal": fill(rule.proposal, values),
                    "trade_off": fill(rule.trade_off, values),
                    "addresses_both": rule.addresses_both,
                    "source": "rule",
                }
        return None

    def options_for(
        self, conflict: Mapping[str, Any], proposal: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """The options offered for a conflict: the pack's options in order, each when its
        condition holds; the synthesis option from ``proposal`` (a mediator's) or the first
        matching synthesis rule, else left out; at most ``max_options``."""
        synthesis = dict(proposal) if proposal is not None else self.synthesis_for(conflict)
        values = _values(conflict)
        item = {**values, "synthesis": synthesis}
        variables = {"item": item, "context": {}}
        options: list[dict[str, Any]] = []
        for option, when, recommended in zip(
            self.spec.options, self.when, self.recommended, strict=True
        ):
            if when is not None and not when(**variables):
                continue
            if option.synthesis:
                if synthesis is None:
                    continue
                text, trade_off = synthesis["proposal"], synthesis["trade_off"]
            else:
                template = option.text
                if conflict.get("type") == IMPLICIT and option.implicit_text is not None:
                    template = option.implicit_text
                text, trade_off = fill(template, values), fill(option.trade_off, values)
            options.append(
                {
                    "label": option.label,
                    "name": option.name,
                    "text": text,
                    "trade_off": trade_off,
                    "recommended": bool(recommended is not None and recommended(**variables)),
                }
            )
        return options[: self.spec.max_options]

    # ------------------------------------------------------------------ order, termination

    def priority(self, conflict: Mapping[str, Any]) -> tuple[int, int, int, str]:
        """Severity (the pack's order), then the item's own round (older first: the round
        in its id when ``id_round`` reads one, else the round the conflict was found in),
        then the id's number (seed 001 §7)."""
        order = self.spec.severity_order
        severity = conflict.get("severity")
        rank = order.index(severity) if severity in order else len(order)
        ref = str(conflict.get("ref"))
        round_number = self.own_round(ref)
        if round_number is None:
            found = conflict.get("round")
            round_number = found if isinstance(found, int) else 0
        return (rank, round_number, int(conflict.get("number") or 0), ref)

    def own_round(self, ref: str) -> int | None:
        """The round an item was raised in, read from its id by ``id_round``; None when the
        pack declares no such pattern or the id does not match it."""
        if self.spec.id_round is None:
            return None
        match = compile_pattern(self.spec.id_round).search(ref)
        if match is None:
            return None
        digits = _DIGITS.search(match.group(1) if match.re.groups else match.group(0))
        return int(digits.group(0)) if digits else None

    def ordered(self, conflicts: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return sorted(conflicts, key=self.priority)

    def termination(self, state: str, unresolved: Sequence[Mapping[str, Any]]) -> Termination:
        """Whether the ``unresolved`` conflicts allow ``state`` (the pack's table)."""
        table = self.spec.termination
        if table is None:
            return Termination(state, "allowed", ())
        blocked: list[str] = []
        warned: list[str] = []
        for conflict in self.ordered(unresolved):
            for rule in table.rules:
                if rule.severity != conflict.get("severity"):
                    continue
                line = f"{conflict['ref']} ({rule.severity}) is unresolved"
                if state in rule.blocks:
                    blocked.append(f"{line}: it blocks {state}")
                elif state in rule.warns:
                    warned.append(f"{line}: {state} needs acknowledgement")
        if blocked:
            return Termination(state, "blocked", tuple(blocked))
        if warned:
            return Termination(state, "warn", tuple(warned))
        return Termination(state, "allowed", ())


def _entries(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _values(conflict: Mapping[str, Any]) -> dict[str, Any]:
    """The names a template or condition sees: the fields, then id, severity, round, type."""
    fields = conflict.get("fields")
    values = {k: ("" if v is None else v) for k, v in (fields or {}).items()}
    values.update(
        id=conflict.get("ref"),
        severity=conflict.get("severity"),
        round=conflict.get("round"),
        type=conflict.get("type"),
    )
    return values


def compile_conflicts(spec: ConflictRules, locate: Locate | None = None) -> CompiledConflicts:
    """Compile a pack's conflict rules once (the option conditions; ``locate`` gives their
    places in the pack for their errors)."""

    def condition(expression: str | None, index: int, key: str) -> Callable[..., Any] | None:
        if not expression:
            return None
        where = locate(("conflicts", "options", index, key)) if locate else None
        return compile_condition(expression, where)

    return CompiledConflicts(
        spec,
        tuple(condition(o.when, i, "when") for i, o in enumerate(spec.options)),
        tuple(condition(o.recommended, i, "recommended") for i, o in enumerate(spec.options)),
    )


def compile_section(pack: Rulepack, compiling: Compiling) -> CompiledConflicts | None:
    """The conflict rules compiled (None when the pack declares none)."""
    if pack.conflicts is None:
        return None

    return compile_conflicts(pack.conflicts, compiling.locate)
