"""The registry of contract kinds: ``kind:`` name → the module that implements it.

Kinds are imported when first used, so a command that parses sentinel blocks never imports
the JSON Schema machinery. Adding a kind is its module plus one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.contracts.kind import CompiledContract, ContractKind
    from engine.format.loader import KeyPath
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker

_KIND_MODULES: dict[str, str] = {
    "sentinel": "engine.contracts.sentinel.kind",
    "markdown": "engine.contracts.markdown.kind",
    "json": "engine.contracts.json.kind",
    "text": "engine.contracts.text.kind",
}


def kind_names() -> list[str]:
    return list(_KIND_MODULES)


def contract_kind(name: str) -> ContractKind:
    """The kind registered as ``name`` (each module exposes it as ``KIND``)."""
    module = importlib.import_module(_KIND_MODULES[name])
    kind: ContractKind = module.KIND
    return kind


def kind_of(contract: Any) -> ContractKind:
    """The kind of a validated contract model (its ``kind`` field)."""
    return contract_kind(contract.kind)


def check_contracts(pack: Rulepack, checker: PackChecker) -> None:
    """Each contract checked by its kind, and the failure types its defaults report."""
    for name, contract in pack.contracts.items():
        kind = kind_of(contract)
        for setting, failure in kind.default_failures(contract, pack):
            if failure not in pack.failure_types:
                checker.add(
                    "unknown-failure-type",
                    f"contract {name!r} reports failure type {failure!r} "
                    f"(the default of {setting}), which is not declared",
                    ("contracts", name),
                    "declare it under `failure_types:` or add `extends: [builtin:core]`",
                    is_key=True,
                )
        kind.check(name, contract, checker)


def compile_contracts(
    pack: Rulepack, folder_of: Callable[[KeyPath], Path]
) -> dict[str, CompiledContract]:
    """Every contract of a validated pack, compiled by its kind."""
    return {
        name: kind_of(contract).compile(name, contract, pack, folder_of)
        for name, contract in pack.contracts.items()
    }


def contract_types() -> dict[str, Any]:
    """The names the root model's annotations use for contract models: ``Contract`` (the
    union of the registered kinds' models, told apart by ``kind``) and each model class.
    Empty while the contract models still live in format/model.py."""
    return {}
