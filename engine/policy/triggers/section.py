"""The ``triggers:`` and ``hints:`` sections: their models in ``model.py``, their checks in
``checks.py``, the decision in ``decide.py``; here what their templates see and how the
triggers compile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.section import BuiltinSection, Compiling
from engine.policy.triggers.decide import CompiledPolicy, compile_policy

if TYPE_CHECKING:
    from engine.format.model import Rulepack

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

EXAMPLE_VARIABLES = frozenset(
    {"params", "context", "example", "example_source", "example_tier", "example_truncated"}
)
"""What a template that may show an example sees besides its purpose's own variables: the
block's params, the pack's context, and the example the ``examples:`` tiers chose."""

# Variables the engine provides to the templates of the purposes triggers use.
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
            "dropped",
        }
    )
    | EXAMPLE_VARIABLES,
    # `dropped`: the parts the prompt budget left out (engine.prompts.budget); a template
    # marks a part of its own with {% if "NAME" not in dropped %}
    "retry": _DECISION_VARIABLES
    | {
        "modification",
        "example",
        "example_source",
        "example_tier",
        "example_truncated",
        "dropped",
    },
    "escalation": _DECISION_VARIABLES,
}


def _compile(pack: Rulepack, compiling: Compiling) -> CompiledPolicy:
    return compile_policy(pack, compiling.locate, lazy=compiling.lazy)


TRIGGERS = BuiltinSection(
    "triggers", "engine.policy.triggers.checks:declared_triggers", _compile, TEMPLATE_VARIABLES
)
HINTS = BuiltinSection("hints", "engine.policy.triggers.checks:declared_hints")
