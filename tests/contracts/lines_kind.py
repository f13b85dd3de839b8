"""A contract kind defined outside the engine, as a team would ship one: ``kind: lines``, an
output of exactly ``count`` non-empty lines. Registered by tests/contracts/test_plugin_kind.py
through the registry API, and through an entry point of group ``rules_engine.kinds``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from engine.plugins import (
    ContractModel,
    EvaluationInput,
    Failure,
    FailureRef,
    FindingRule,
    Message,
    ParseResult,
    Verdict,
    declared_default_failures,
    no_parser_error,
    verdict_from_checks,
)

MAX_COUNT = 1000

# The kind's own finding rule, defined beside its check: `rules check --list-rules` lists it.
TOO_MANY_LINES = FindingRule(
    "lines-too-many",
    "A lines contract asks for more lines than the kind checks.",
    f"Ask for {MAX_COUNT} lines or fewer.",
)


class LinesContract(ContractModel):
    """An output of exactly ``count`` non-empty lines."""

    kind: Literal["lines"]
    count: int = Field(ge=1)
    message: Message = "expected {count} non-empty lines, found {found}"
    fail: FailureRef = "WRONG_FORMAT"


@dataclass(frozen=True)
class CompiledLines:
    name: str
    contract: LinesContract = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    param_names: frozenset[str] = frozenset()

    @property
    def id_patterns(self) -> Mapping[str, str]:
        return {}

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        raise no_parser_error(self.name, "lines")

    def evaluate(self, output: EvaluationInput) -> Verdict:
        found = sum(1 for line in (output.text or "").splitlines() if line.strip())
        failures = []
        if found != self.contract.count:
            message = self.contract.message.format(count=self.contract.count, found=found)
            failures.append(Failure(self.contract.fail, message))
        data = {"lines": found}
        return verdict_from_checks(self.name, failures, [], data, self.severities)

    def failure_tier(self, failure_type: str) -> str:
        return "structure"


class LinesKind:
    name = "lines"
    model = LinesContract

    def resolve(self, contract: LinesContract, contracts: Mapping[str, Any]) -> Any:
        return contract

    def named_checks(self, contract: LinesContract) -> Mapping[str, str]:
        return {}

    def default_failures(self, contract: LinesContract, pack: Any) -> list[tuple[str, str]]:
        return declared_default_failures(contract)

    def check(self, name: str, contract: LinesContract, checker: Any) -> None:
        if contract.count > MAX_COUNT:
            checker.add(
                TOO_MANY_LINES,
                f"contract {name!r} asks for {contract.count} lines (at most {MAX_COUNT})",
                ("contracts", name, "count"),
                f"ask for {MAX_COUNT} lines or fewer",
            )

    def compile(
        self,
        name: str,
        contract: LinesContract,
        pack: Any,
        folder_of: Callable[[tuple[str | int, ...]], Path],
    ) -> CompiledLines:
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledLines(name, contract, severities)


KIND = LinesKind()
