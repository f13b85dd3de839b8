"""The ``contracts:`` section as the root model declares it (engine.contracts.section names
it): the union of the registered kinds' models and their checks. Only composing the root
model and checking a pack import this module (pydantic, the kinds' models), never a pack
compiled from its image."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Field

from engine.contracts.registry import contract_models, kind_of
from engine.format.section import Declared
from engine.format.semantics import UNKNOWN_FAILURE_TYPE

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


def contracts() -> Declared:
    """The ``contracts:`` section in the root model: each contract a model of its kind,
    told apart by ``kind`` (asked afresh each time: kinds register)."""
    models = contract_models()
    return Declared(
        dict[str, contract_union(models)],  # type: ignore[misc]
        Field(default_factory=dict),
        {model.__name__: model for model in models},
        check_contracts,
    )


def contract_union(models: list[type[Any]]) -> Any:
    """The type of a contract of one of ``models``, told apart by ``kind``."""
    union = models[0] if len(models) == 1 else Union[tuple(models)]  # noqa: UP007
    return Annotated[union, Field(discriminator="kind")]


def check_contracts(pack: Rulepack, checker: PackChecker) -> None:
    """Each contract checked by its kind, and the failure types its defaults report."""
    for name, contract in pack.contracts.items():
        kind = kind_of(contract)
        for setting, failure in kind.default_failures(contract, pack):
            if failure not in pack.failure_types:
                checker.add(
                    UNKNOWN_FAILURE_TYPE,
                    f"contract {name!r} reports failure type {failure!r} "
                    f"(the default of {setting}), which is not declared",
                    ("contracts", name),
                    "declare it under `failure_types:` or add `extends: [builtin:core]`",
                    is_key=True,
                )
        kind.check(name, contract, checker)
