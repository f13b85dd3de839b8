"""The ``rate_limits:`` and ``limits:`` sections: their models in ``model.py``, the checks
in ``checks.py``, rate limits compiled and measured in ``rates.py`` (with the triggers);
here what presentations see."""

from __future__ import annotations

from engine.format.section import BuiltinSection

# Variables the engine provides to presentation templates (a rate limit that held).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "presentation": frozenset(
        ["block", "limit", "action", "message", "recommendation", "figures", "items", "context"]
    ),
}


RATE_LIMITS = BuiltinSection(
    "rate_limits",
    "engine.policy.limits.checks:declared_rate_limits",
    template_variables=TEMPLATE_VARIABLES,
)
LIMITS = BuiltinSection("limits", "engine.policy.limits.checks:declared_limits")
