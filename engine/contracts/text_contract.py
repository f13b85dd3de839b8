"""The ``text`` contract kind: plain text with size and pattern bounds.

Checked by `rules check`; evaluating outputs is not implemented yet: `evaluate` says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.contracts.json_contract import UnevaluatedContract
from engine.format.model import declared_default_failures

if TYPE_CHECKING:
    from engine.format.model import Rulepack, TextContract
    from engine.format.semantics import PackChecker


class TextKind:
    name = "text"

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        return declared_default_failures(contract)

    def check(self, name: str, contract: TextContract, checker: PackChecker) -> None:
        """Its patterns and references are checked by the generic walk."""

    def compile(self, name: str, contract: TextContract, pack: Rulepack) -> UnevaluatedContract:
        return UnevaluatedContract(name, self.name)


KIND = TextKind()
