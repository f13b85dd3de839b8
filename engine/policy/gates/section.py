"""The ``gates:`` section: its model in ``model.py``, its checks in ``checks.py``,
compiling and running gates in ``runtime.py``; here what gate templates see and how the
gates compile."""

from __future__ import annotations

from engine.format.section import BuiltinSection

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


GATES = BuiltinSection(
    "gates",
    "engine.policy.gates.checks:declared",
    "engine.policy.gates.runtime:compile_section",
    TEMPLATE_VARIABLES,
)
