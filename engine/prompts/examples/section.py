"""The ``examples:`` section: the models in ``model.py``, tiers and selection in
``select.py``; here what example templates see."""

from __future__ import annotations

from pydantic import Field

from engine.format.section import BuiltinSection
from engine.prompts.examples.model import Examples

# Variables the engine provides to example templates (tier 3).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "example": frozenset({"block", "context"}),
}

EXAMPLES = BuiltinSection(
    "examples", Examples, Field(default_factory=Examples), {"Examples": Examples}
)
