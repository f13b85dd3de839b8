"""The root key ``sentinel:``: the grammar the pack's sentinel contracts share (its model
in ``model.py``); listed with the contracts in ``engine.contracts.section``."""

from __future__ import annotations

from engine.format.section import BuiltinSection

GRAMMAR = BuiltinSection("sentinel", "engine.contracts.kinds.sentinel.model:declared_grammar")
