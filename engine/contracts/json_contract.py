"""The ``json`` contract kind: a JSON document checked against a JSON Schema of the pack.

Checked by `rules check` (the schema file is a valid schema); evaluating outputs is not
implemented yet: `evaluate` says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.contracts.kind import EvaluationInput, no_parser_error
from engine.errors import EvaluationError
from engine.format.model import declared_default_failures

if TYPE_CHECKING:
    from engine.format.loader import KeyPath
    from engine.format.model import JsonContract, Rulepack
    from engine.format.semantics import PackChecker
    from engine.results import ParseResult
    from engine.verdict import Verdict


@dataclass(frozen=True)
class UnevaluatedContract:
    """A contract of a kind whose evaluation does not exist yet: every call says so."""

    name: str
    kind: str
    param_names: frozenset[str] = frozenset()

    @property
    def id_patterns(self) -> Mapping[str, str]:
        return {}

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        raise no_parser_error(self.name, self.kind)

    def evaluate(self, output: EvaluationInput) -> Verdict:
        raise EvaluationError(f"evaluating {self.kind} contracts is not implemented yet")

    def failure_tier(self, failure_type: str) -> str:
        return "structure"



class JsonKind:
    name = "json"

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        return declared_default_failures(contract)

    def check(self, name: str, contract: JsonContract, checker: PackChecker) -> None:
        import jsonschema

        path: KeyPath = ("contracts", name, "schema_file")
        target = checker.quiet_resolve(contract.schema_file, path)
        if target is None:
            return
        try:
            schema = json.loads(target.read_text(encoding="utf-8"))
            validator = jsonschema.validators.validator_for(schema)
            validator.check_schema(schema)
        except (ValueError, UnicodeDecodeError) as exc:
            checker.add("invalid-schema", f"schema file is not valid JSON: {exc}", path,
                        "fix the JSON syntax")
        except jsonschema.SchemaError as exc:
            checker.add("invalid-schema", f"schema file is not a valid JSON Schema: "
                        f"{exc.message}", path, "fix the schema")

    def compile(self, name: str, contract: JsonContract, pack: Rulepack) -> UnevaluatedContract:
        return UnevaluatedContract(name, self.name)


KIND = JsonKind()
