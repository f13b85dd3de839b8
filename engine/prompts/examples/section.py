"""The ``examples:`` section: the models in ``model.py``, tiers and selection in
``select.py``; here what example templates see."""

from __future__ import annotations

from engine.format.section import BuiltinSection, Declared, single

# Variables the engine provides to example templates (tier 3).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "example": frozenset({"block", "context"}),
}


def _declared() -> Declared:
    # Deferred for start-up time: the model imports pydantic, which compiling a pack read
    # back from its image never needs (engine.format.section).
    from engine.prompts.examples.model import Examples

    return single(Examples)


EXAMPLES = BuiltinSection("examples", _declared, template_variables=TEMPLATE_VARIABLES)
