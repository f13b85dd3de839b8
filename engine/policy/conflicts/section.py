"""The ``conflicts:`` section: its models in ``model.py``, its checks in ``checks.py``,
which conflicts a verdict holds and their options in ``runtime.py`` (recording them is
``engine.session.conflicts``); here what conflict templates see and how the rules compile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.section import BuiltinSection, Compiling
from engine.policy.conflicts.runtime import compile_conflicts

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.policy.conflicts.runtime import CompiledConflicts

# Variables the engine provides to the conflict presentation and the decisions record.
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "conflicts": frozenset({"conflicts", "total", "rounds", "context"}),
}


def _compile(pack: Rulepack, compiling: Compiling) -> CompiledConflicts | None:
    """The conflict rules compiled (None when the pack declares none)."""
    if pack.conflicts is None:
        return None

    return compile_conflicts(pack.conflicts, compiling.locate)


CONFLICTS = BuiltinSection(
    "conflicts", "engine.policy.conflicts.checks:declared", _compile, TEMPLATE_VARIABLES
)
