"""The sections the contract kinds own: ``contracts:`` (each contract a model of its kind,
told apart by ``kind``; checked and compiled by its kind) and the root keys a kind adds
(the sentinel kind's shared grammar, ``sentinel:``). The table of sections
(``engine.pack.sections``) lists them; nothing else names a kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.contracts.kinds.sentinel.section import GRAMMAR
from engine.contracts.registry import compile_contract
from engine.core.lazy import BuiltOnUse
from engine.format.section import BuiltinSection, Compiling

if TYPE_CHECKING:
    from engine.contracts.kind import CompiledContract
    from engine.format.model import Rulepack


def _compile(pack: Rulepack, compiling: Compiling) -> BuiltOnUse[CompiledContract]:
    """Each contract compiled by its kind: all now, or each when first used."""
    contracts = pack.contracts

    def compiled(name: str) -> CompiledContract:
        return compile_contract(name, contracts[name], pack, compiling.folder_of)

    built = BuiltOnUse(contracts, compiled)
    if not compiling.lazy:
        built.build_all()
    return built


CONTRACTS = BuiltinSection("contracts", "engine.contracts.declared:contracts", _compile)

SECTIONS: tuple[BuiltinSection, ...] = (GRAMMAR, CONTRACTS)
"""In the order of the format's keys."""
