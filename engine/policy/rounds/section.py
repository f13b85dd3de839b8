"""The ``rounds:`` section: round statuses per block, shown by log templates and used for
``all_failed``; the model in ``model.py``, the statuses recorded by ``engine.session``."""

from __future__ import annotations

from engine.format.section import BuiltinSection, Declared, single

# Variables the engine provides to log templates (the session's views of its ledger).
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "log": frozenset({"entries", "rounds", "session", "gate_results", "failed_gates"}),
}


def _declared() -> Declared:
    # Deferred for start-up time: the model imports pydantic, which compiling a pack read
    # back from its image never needs (engine.format.section).
    from engine.policy.rounds.model import Rounds

    return single(Rounds | None, default=None)


ROUNDS = BuiltinSection("rounds", _declared, template_variables=TEMPLATE_VARIABLES)
