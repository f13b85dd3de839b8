"""The checks of the ``conflicts:`` section (section.py declares it): template purposes,
the checks it names, option labels, severities and termination states."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.findings import FindingRule
from engine.format.section import Declared, single
from engine.format.semantics import NO_BEHAVIOUR, UNKNOWN_SEVERITY
from engine.format.sourcemap import KeyPath
from engine.policy.conflicts.model import ConflictRules

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


DUPLICATE_OPTION = FindingRule(
    "duplicate-option",
    "Two options with the same label.",
    "Rename one of them.",
)

UNKNOWN_CHECK = FindingRule(
    "unknown-check",
    "A check refers to a check that does not exist.",
    "Fix the name.",
)

UNKNOWN_STATE = FindingRule(
    "unknown-state",
    "A termination rule names a state that is not declared.",
    "Add it to `termination.states`.",
)


def check_conflicts(pack: Rulepack, checker: PackChecker) -> None:
    """Conflict templates have the right purpose; the conflict rules name checks of their
    block, unique option labels, known severities."""
    spec = pack.conflicts
    if spec is None:
        return
    base: KeyPath = ("conflicts",)
    checker.template_purpose(spec.presentation, "conflicts", (*base, "presentation"))
    checker.template_purpose(spec.decisions, "conflicts", (*base, "decisions"))
    contract = pack.contracts.get(spec.block)
    named = contract.named_checks() if contract is not None else {}
    for key, kind in (("explicit", "sections"), ("implicit", "coverage")):
        value = getattr(spec, key)
        if value is not None and contract is not None and named.get(value) != kind:
            checker.add(
                UNKNOWN_CHECK,
                f"conflicts.{key} names {value!r}, which is no {kind} check of "
                f"block {spec.block!r}",
                (*base, key),
                f"name the `name:` of a `check: {kind}` of that block's contract",
            )
    labels = [option.label for option in spec.options]
    for label in sorted({x for x in labels if labels.count(x) > 1}):
        checker.add(DUPLICATE_OPTION, f"option {label} is declared twice", (*base, "options"))
    if spec.synthesis and not any(option.synthesis for option in spec.options):
        checker.add(
            NO_BEHAVIOUR,
            "synthesis rules are declared but no option has `synthesis: true`",
            (*base, "synthesis"),
            "add an option with `synthesis: true`",
            level="warning",
        )
    if spec.termination is not None:
        for index, rule in enumerate(spec.termination.rules):
            if rule.severity not in spec.severity_order:
                checker.add(
                    UNKNOWN_SEVERITY,
                    f"termination rule for {rule.severity!r}, which is not in severity_order",
                    (*base, "termination", "rules", index, "severity"),
                    f"severities: {', '.join(spec.severity_order)}",
                )
            for state in sorted({*rule.blocks, *rule.warns} - set(spec.termination.states)):
                checker.add(
                    UNKNOWN_STATE,
                    f"termination state {state!r} is not in termination.states",
                    (*base, "termination", "rules", index),
                    f"states: {', '.join(spec.termination.states)}",
                )


def declared() -> Declared:
    """The ``conflicts:`` section in the root model (section.py names it)."""
    return single(ConflictRules | None, check_conflicts, default=None)
