"""The sections the contract kinds own: ``contracts:`` (each contract a model of its kind,
told apart by ``kind``; checked and compiled by its kind) and the root keys a kind adds
(the sentinel kind's shared grammar, ``sentinel:``). The table of sections
(``engine.pack.sections``) lists them; nothing else names a kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.contracts.registry import (
    check_contracts,
    compile_contract,
    contract_models,
    contract_union,
)
from engine.contracts.sentinel.section import GRAMMAR
from engine.core.lazy import BuiltOnUse
from engine.format.section import BuiltinSection, Compiling, Declared

if TYPE_CHECKING:
    from engine.contracts.kind import CompiledContract
    from engine.format.model import Rulepack


def _declared() -> Declared:
    # Deferred for start-up time: only composing the root model needs pydantic.
    from pydantic import Field

    models = contract_models()
    return Declared(
        dict[str, contract_union(models)],  # type: ignore[misc]
        Field(default_factory=dict),
        {model.__name__: model for model in models},
        check_contracts,
    )


def _compile(pack: Rulepack, compiling: Compiling) -> BuiltOnUse[CompiledContract]:
    """Each contract compiled by its kind: all now, or each when first used."""
    contracts = pack.contracts

    def compiled(name: str) -> CompiledContract:
        return compile_contract(name, contracts[name], pack, compiling.folder_of)

    built = BuiltOnUse(contracts, compiled)
    if not compiling.lazy:
        built.build_all()
    return built


CONTRACTS = BuiltinSection("contracts", _declared, _compile)

SECTIONS: tuple[BuiltinSection, ...] = (GRAMMAR, CONTRACTS)
"""In the order of the format's keys."""
