"""The ``conflicts:`` section: its models in ``model.py``, its checks in ``checks.py``,
which conflicts a verdict holds and their options in ``runtime.py`` (recording them is
``engine.session.conflicts``); here what conflict templates see and how the rules compile."""

from __future__ import annotations

from engine.format.section import BuiltinSection

# Variables the engine provides to the conflict presentation and the decisions record.
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "conflicts": frozenset({"conflicts", "total", "rounds", "context"}),
}


CONFLICTS = BuiltinSection(
    "conflicts",
    "engine.policy.conflicts.checks:declared",
    "engine.policy.conflicts.runtime:compile_section",
    TEMPLATE_VARIABLES,
)
