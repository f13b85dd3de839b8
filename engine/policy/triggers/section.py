"""The ``triggers:`` and ``hints:`` sections: models in ``model.py``, the decision in
``decide.py``; here what their templates and guards may see and their checks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from engine.format.fields import ContractRef, Ref
from engine.format.findings import FindingRule
from engine.format.section import BuiltinSection
from engine.policy.triggers.model import Hint, Trigger

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


NOT_RETRIABLE = FindingRule(
    "not-retriable",
    "A trigger retries a failure type declared `retriable: false`.",
    "Remove it from `on:` or declare it retriable.",
)

# What retry and escalation templates see of the decision (engine.prompts.render).
_DECISION_VARIABLES = frozenset(
    {
        "block",
        "block_type",
        "attempt",
        "next_attempt",
        "max_attempts",
        "retries_left",
        "reason",
        "rule",
        "user_context",
        "failure_type",
        "failure_message",
        "failures",
        "data",
        "context",
    }
)

# Variables the engine provides to the templates of the purposes triggers use (templates
# may also use every context key their pack declares).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "repair": frozenset(
        {
            "block_type",
            "nonce",
            "parser_error",
            "failures",
            "micro_hint",
            "original_output",
            "format_contract",
            "failure_type",
            "attempt",
            "next_attempt",
            "max_attempts",
            "params",
            "context",
        }
    ),
    "retry": _DECISION_VARIABLES
    | {"modification", "example", "example_source", "example_tier", "example_truncated"},
    "escalation": _DECISION_VARIABLES,
}

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


def _compile_triggers(pack: Rulepack, root: Path) -> Any:
    # Imported here for start-up time: `rules check` loads the sections, not the policy.
    from engine.policy.triggers.decide import compile_policy

    return compile_policy(pack)


TRIGGERS = BuiltinSection.mapping(
    "triggers", ContractRef, Trigger, check_triggers, _compile_triggers
)
HINTS = BuiltinSection("hints", list[Hint], Field(default_factory=list), {"Hint": Hint})
