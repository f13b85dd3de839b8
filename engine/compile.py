"""Turning a validated pack into ready parsers: patterns and grammars compiled once."""

from __future__ import annotations

from engine.contracts.sentinel.parser import SentinelParser
from engine.format.model import Rulepack, SentinelContract


def compile_parsers(model: Rulepack) -> dict[str, SentinelParser]:
    return {
        name: SentinelParser(name, contract, model.sentinel)
        for name, contract in model.contracts.items()
        if isinstance(contract, SentinelContract)
    }
