"""The ``rate_limits:`` and ``limits:`` sections: their models in ``model.py``, the checks
in ``checks.py``, rate limits compiled and measured in ``rates.py`` (with the triggers);
here what presentations see."""

from __future__ import annotations

from functools import partial

from engine.format.section import BuiltinSection, Declared, mapping, single

# Variables the engine provides to presentation templates (a rate limit that held).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "presentation": frozenset(
        ["block", "limit", "action", "message", "recommendation", "figures", "items", "context"]
    ),
}


def _declared(key: str) -> Declared:
    # Deferred for start-up time: the models and checks import pydantic, which compiling a
    # pack read back from its image never needs (engine.format.section).
    from engine.format import fields
    from engine.policy.limits import checks, model

    if key == "limits":
        return single(model.Limits)
    return mapping(
        fields.ContractRef,
        model.RateLimits,
        checks.check_rate_limits,
        description="per block: limits on counts in its outputs, "
        "per round and over a window of rounds",
    )


RATE_LIMITS = BuiltinSection(
    "rate_limits", partial(_declared, "rate_limits"), template_variables=TEMPLATE_VARIABLES
)
LIMITS = BuiltinSection("limits", partial(_declared, "limits"))
