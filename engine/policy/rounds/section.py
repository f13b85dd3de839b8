"""The ``rounds:`` section: round statuses per block, shown by log templates and used for
``all_failed``; the model in ``model.py``, the statuses recorded by ``engine.session``."""

from __future__ import annotations

from pydantic import Field

from engine.format.section import BuiltinSection
from engine.policy.rounds.model import Rounds

# Variables the engine provides to log templates (the session's views of its ledger).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "log": frozenset({"entries", "rounds", "session", "gate_results", "failed_gates"}),
}

ROUNDS = BuiltinSection("rounds", Rounds | None, Field(default=None), {"Rounds": Rounds})
