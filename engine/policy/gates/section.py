"""The ``gates:`` section: its model in ``model.py``, its checks in ``checks.py``,
compiling and running gates in ``runtime.py``; here what gate templates see and how the
gates compile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.format.section import BuiltinSection, Compiling
from engine.policy.gates.runtime import compile_gates

if TYPE_CHECKING:
    from engine.format.model import Rulepack

# What gate reprompt and artifact templates see of a gate result (engine.policy.gates.runtime).
_GATE_RESULT_VARIABLES = frozenset(
    {
        "gate",
        "action",
        "valid",
        "errors",
        "missing",
        "checked",
        "outputs",
        "retry",
        "max_retry",
        "timestamp",
        "timestamp_compact",
        "output_file",
        "context",
    }
)

# Variables the engine provides to the templates of the purposes gates use.
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "reprompt": _GATE_RESULT_VARIABLES | {"descriptions", "artifact"},
    "artifact": _GATE_RESULT_VARIABLES,
}


def _compile(pack: Rulepack, compiling: Compiling) -> Any:
    """The gates with the pack's templates (None when the pack declares no gate)."""
    if not pack.gates.steps:
        return None

    templates = compiling.section("templates").templates
    return compile_gates(pack, compiling.folder_of, templates, compiling.locate)


GATES = BuiltinSection("gates", "engine.policy.gates.checks:declared", _compile, TEMPLATE_VARIABLES)
