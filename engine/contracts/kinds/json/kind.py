"""The ``json`` contract kind: JSON taken from the output and checked against a JSON Schema
file of the pack.

`rules check` reads the schema (a valid schema whose references stay inside it); loading
compiles its validator once. An output that is not JSON gives the contract's parse failure
with line and column; each way the document breaks the schema gives one schema failure,
with a JSON Pointer, in a deterministic order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.contracts.json_documents import JsonDocumentError, dotted, read_documents
from engine.contracts.json_schemas import (
    check_schema_file,
    compile_schema,
    read_schema_file,
    schema_violations,
)
from engine.contracts.kind import ChecksText, EvaluationInput, StandaloneKind
from engine.contracts.kinds.json.model import JsonContract
from engine.contracts.kinds.json.prefix import JsonPrefix, allowed_keys
from engine.contracts.placeholder import is_placeholder, placeholder_message
from engine.core.errors import PackError
from engine.core.results import Failure
from engine.core.verdict import verdict_from_checks

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


@dataclass(frozen=True)
class CompiledJson(ChecksText):
    """A json contract ready to check outputs: its schema's validator built once."""

    name: str
    contract: JsonContract = field(repr=False)
    validator: Any = field(repr=False)
    severities: Mapping[str, str] = field(repr=False)
    param_names: frozenset[str] = frozenset()

    def evaluate_text(self, text: str) -> Verdict:
        contract = self.contract
        try:
            documents = read_documents(
                text,
                extract=contract.extract,
                many=contract.many,
                max_chars=contract.max_chars,
                max_depth=contract.max_depth,
                max_documents=contract.max_documents,
            )
        except JsonDocumentError as exc:
            failure = Failure(contract.parse_failure, exc.message, exc.line)
            return verdict_from_checks(self.name, [failure], [], None, dict(self.severities))
        failures = []
        for index, document in enumerate(documents):
            many = contract.many != "one"
            prefix = f"item {index + 1}: " if many else ""
            copied = placeholders(document)
            for pointer_of, message in copied:
                pointer = f"/{index}{pointer_of}" if many else pointer_of
                failures.append(Failure(contract.schema_failure, prefix + message, path=pointer))
            named = {pointer for pointer, _ in copied}
            for violation in schema_violations(self.validator, document, contract.max_errors):
                if violation.pointer in named:
                    continue  # the placeholder says it better than the schema's own words
                pointer = f"/{index}{violation.pointer}" if many else violation.pointer
                failures.append(
                    Failure(
                        contract.schema_failure,
                        prefix + (violation.sentence or violation.message),
                        path=None if violation.summary else pointer,
                    )
                )
        data = documents[0] if contract.many == "one" else documents
        return verdict_from_checks(self.name, failures, [], data, dict(self.severities))

    def failure_tier(self, failure_type: str) -> str:
        return "content" if failure_type == self.contract.schema_failure else "structure"

    def prefix_reader(self, output: EvaluationInput) -> JsonPrefix | None:
        """What a streamed output's first part decides (a syntax error, a key the schema
        forbids), when the JSON is the whole output: ``engine.contracts.kinds.json.prefix``."""
        contract = self.contract
        if contract.extract != "whole" or contract.many == "jsonl":
            return None
        schema = getattr(self.validator, "schema", None)
        allowed = allowed_keys(schema) if contract.many == "one" else None
        return JsonPrefix(contract.parse_failure, contract.schema_failure, allowed)


class JsonKind(StandaloneKind):
    name = "json"
    model = JsonContract

    def check(self, name: str, contract: JsonContract, checker: PackChecker) -> None:
        check_schema_file(checker, contract.schema_file, ("contracts", name, "schema_file"))

    def compile(
        self,
        name: str,
        contract: JsonContract,
        pack: Rulepack,
        folder_of: Callable[[KeyPath], Path],
    ) -> CompiledJson:
        target = folder_of(("contracts", name, "schema_file")) / contract.schema_file
        try:
            validator = compile_schema(read_schema_file(target))
        except ValueError as exc:
            raise PackError(f"{target}: {exc}") from None
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledJson(name, contract, validator, severities)


KIND = JsonKind()


def placeholders(document: Any, limit: int = 10) -> list[tuple[str, str]]:
    """``(JSON Pointer, message)`` of each string in ``document`` that is still a template
    placeholder (``"<one line>"``), at most ``limit``, in document order."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[list[Any], Any]] = [([], document)]
    while stack and len(found) < limit:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((([*path, k], v) for k, v in reversed(list(value.items()))))
        elif isinstance(value, list):
            stack.extend((([*path, i], v) for i, v in reversed(list(enumerate(value)))))
        elif is_placeholder(value):
            pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
            found.append((pointer, placeholder_message(dotted(path) or "(root)", value)))
    return found
