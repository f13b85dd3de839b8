"""The checks of the ``triggers:`` section (section.py declares it): what guards may see,
failure types a trigger cannot retry."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.fields import ContractRef, Ref
from engine.format.findings import FindingRule
from engine.format.section import Declared, mapping, single
from engine.policy.triggers.model import Hint, Trigger

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


NOT_RETRIABLE = FindingRule(
    "not-retriable",
    "A trigger retries a failure type declared `retriable: false`.",
    "Remove it from `on:` or declare it retriable.",
)

# Variables a condition expression (guards) may use.
CONDITION_VARIABLES: frozenset[str] = frozenset(
    {
        "output",
        "error",
        "failure_type",
        "failures",
        "attempt",
        "max_attempts",
        "block",
        "previous_errors",
        "status",
        "warnings",
        "data",
        "context",
        "missing",
        "errors",
    }
)


def check_triggers(pack: Rulepack, checker: PackChecker) -> None:
    """Guards use only the variables conditions see. A trigger never retries a failure type
    declared ``retriable: false``: listing one under ``on:`` would never act, so it is a
    finding."""
    checker.expressions("triggers", {Ref.EXPRESSION: CONDITION_VARIABLES})
    for block, trigger in pack.triggers.items():
        for index, name in enumerate(trigger.on):
            declared = pack.failure_types.get(name)
            if declared is not None and not declared.retriable:
                checker.add(
                    NOT_RETRIABLE,
                    f"trigger {block!r} retries {name}, which is declared "
                    "`retriable: false`: it goes to the after-failure policy instead",
                    ("triggers", block, "on", index),
                    f"remove it from `on:`, or declare `failure_types: {{{name}: "
                    "{retriable: true, ...}}` to retry it",
                )


def declared_triggers() -> Declared:
    """The ``triggers:`` section in the root model (section.py names it)."""
    return mapping(ContractRef, Trigger, check_triggers)


def declared_hints() -> Declared:
    """The ``hints:`` section in the root model (section.py names it)."""
    return single(list[Hint], default_factory=list)
