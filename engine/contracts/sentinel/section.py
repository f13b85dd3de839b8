"""The root key ``sentinel:``: the grammar the pack's sentinel contracts share (its model
in ``model.py``); listed with the contracts in ``engine.contracts.section``."""

from __future__ import annotations

from engine.format.section import BuiltinSection, Declared, single


def _declared() -> Declared:
    # Deferred for start-up time: the model imports pydantic, which compiling a pack read
    # back from its image never needs (engine.format.section).
    from engine.contracts.sentinel.model import SentinelGrammar

    # Built from {}: its defaults are the grammar's.
    return single(SentinelGrammar, default_factory=dict, validate_default=True)


GRAMMAR = BuiltinSection("sentinel", _declared)
