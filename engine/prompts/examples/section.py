"""The ``examples:`` section: the models in ``model.py``, tiers and selection in
``select.py``; here what example templates see."""

from __future__ import annotations

from engine.format.section import BuiltinSection

# Variables the engine provides to example templates (tier 3).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "example": frozenset({"block", "context"}),
}


EXAMPLES = BuiltinSection(
    "examples", "engine.prompts.examples.model:declared", template_variables=TEMPLATE_VARIABLES
)
