"""The ``rounds:`` section: round statuses per block, shown by log templates and used for
``all_failed``; the model in ``model.py``, the statuses recorded by ``engine.session``."""

from __future__ import annotations

from engine.format.section import BuiltinSection

# Variables the engine provides to log templates (the session's views of its ledger).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "log": frozenset({"entries", "rounds", "session", "gate_results", "failed_gates"}),
}


ROUNDS = BuiltinSection(
    "rounds", "engine.policy.rounds.model:declared", template_variables=TEMPLATE_VARIABLES
)
