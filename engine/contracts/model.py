"""What the model of every contract kind builds on: the keys every contract has, and the
failure types a contract reports through settings left at their default."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from engine.format.fields import PackPath, Ref, Strict


class ContractModel(Strict):
    """The keys every contract has; a kind's model adds ``kind: Literal["<name>"]``."""

    description: str = ""
    contract_text: PackPath | None = None

    if TYPE_CHECKING:
        kind: str

    def named_checks(self) -> dict[str, str]:
        """The parts of the contract other sections may name (``conflicts:`` names checks of
        its block): ``name:`` → what it checks. None unless the kind says otherwise."""
        return {}


def declared_default_failures(contract: BaseModel) -> list[tuple[str, str]]:
    """(setting, failure type) of a contract's failure-type settings left at their default."""
    names = [
        n
        for n, f in type(contract).model_fields.items()
        if Ref.FAILURE_TYPE in f.metadata and n not in contract.model_fields_set
    ]
    return [(n, getattr(contract, n)) for n in names]
