"""The ``sentinel`` contract kind: delimited, line-oriented blocks with a grammar in the pack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.contracts.kinds.sentinel.parser import SentinelParser, parser_from_data
from engine.core.errors import EvaluationError
from engine.core.results import Failure
from engine.core.textio import output_problem
from engine.core.verdict import verdict_from_checks, verdict_from_parse
from engine.format.findings import FindingRule

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from engine.contracts.kind import EvaluationInput
    from engine.contracts.kinds.sentinel.model import SentinelContract
    from engine.contracts.kinds.sentinel.prefix import SentinelPrefix
    from engine.core.results import ParseResult
    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


DELIMITER_WITHOUT_NONCE = FindingRule(
    "delimiter-without-nonce",
    "A sentinel opener or closer without {nonce}.",
    "Put NONCE={nonce} in both delimiters.",
)

UNKNOWN_GRAMMAR = FindingRule(
    "unknown-grammar",
    "`grammar:` names no sentinel contract.",
    "Name another sentinel contract of the pack.",
)

UNKNOWN_PARAM = FindingRule(
    "unknown-param",
    "A block parameter its delimiters do not name.",
    "Name it in the opener, or fix the name.",
)

_GRAMMAR_FAILURES = ("parse_failure", "nonce_failure", "input_failure")


@dataclass(frozen=True)
class CompiledSentinel:
    name: str
    parser: SentinelParser = field(repr=False)
    param_names: frozenset[str]
    severities: Mapping[str, str] = field(repr=False)
    id_patterns: Mapping[str, str] = field(default_factory=dict)

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        return self.parser.parse(text, nonce, params)

    def evaluate(self, output: EvaluationInput) -> Verdict:
        if output.text is None:
            raise EvaluationError(f"{output.path}: no such file")
        problem = output_problem(output.text)
        if problem is not None:
            return verdict_from_checks(self.name, [Failure(*problem)], [], None, self.severities)
        parser = self.parser
        shared = output.shared
        key = None if shared is None else parser.reading_key
        if shared is None or key is None:
            result = parser.parse(output.text, output.nonce, output.params)
        else:
            reading = shared.get(key)
            if reading is None:
                reading = shared[key] = parser.read(output.text, output.nonce, output.params)
            result = parser.finish(reading, output.params)
        return verdict_from_parse(self.name, result, self.severities)

    def failure_tier(self, failure_type: str) -> str:
        return "structure"

    def prefix_reader(self, output: EvaluationInput) -> SentinelPrefix | None:
        """What a streamed output's first lines decide (a wrong opener, a second block, a
        field that already broke): ``engine.contracts.kinds.sentinel.prefix``."""
        return self.parser.prefix_reader(output.nonce, output.params)


def _holes(template: str) -> set[str]:
    """Every ``{...}`` of a delimiter template: the delimiter compiler reads each as a name."""
    out: set[str] = set()
    index = 0
    while True:
        start = template.find("{", index)
        end = template.find("}", start) if start >= 0 else -1
        if end < 0:
            return out
        out.add(template[start + 1 : end])
        index = end + 1


class SentinelKind:
    name = "sentinel"
    needs_nonce = True

    @property
    def model(self) -> type[SentinelContract]:
        # Deferred: the model (pydantic) is for composing and checking; compiling and
        # evaluating a contract need none, 0.39 s saved (python -X importtime).
        from engine.contracts.kinds.sentinel.model import SentinelContract

        return SentinelContract

    def resolve(self, contract: SentinelContract, contracts: Mapping[str, Any]) -> Any:
        return contract.with_shared_grammar(contracts)

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        grammar = pack.sentinel
        return [
            (f"sentinel.{n}", getattr(grammar, n))
            for n in _GRAMMAR_FAILURES
            if n not in grammar.model_fields_set
        ]

    def check(self, name: str, contract: SentinelContract, checker: PackChecker) -> None:
        base: KeyPath = ("contracts", name)
        if contract.grammar is not None:
            shared = checker.pack.contracts.get(contract.grammar)
            if getattr(shared, "kind", None) != "sentinel" or getattr(shared, "grammar", None):
                own = sorted(
                    other
                    for other, spec in checker.pack.contracts.items()
                    if spec.kind == "sentinel" and getattr(spec, "grammar", None) is None
                )
                checker.add(
                    UNKNOWN_GRAMMAR,
                    f"`grammar: {contract.grammar}` names no sentinel contract with a grammar "
                    "of its own",
                    (*base, "grammar"),
                    f"name one of: {', '.join(own) or '(none in this pack)'}",
                )
                return
        fields = contract.fields
        for which in ("opener", "closer"):
            holes = _holes(getattr(contract, which))
            if "nonce" not in holes:
                checker.add(
                    DELIMITER_WITHOUT_NONCE,
                    f"{which} has no {{nonce}} placeholder",
                    (*base, which),
                    "write NONCE={nonce} into the delimiter",
                )
            for hole in sorted(holes - {"nonce"} - set(contract.params)):
                checker.add(
                    UNKNOWN_PARAM,
                    f"{which} uses {{{hole}}}, which is not a param",
                    (*base, which),
                    "declare it under `params:`",
                )
        for index, rule in enumerate(contract.rules):
            named = getattr(rule, "field", None)
            if named is not None and named not in fields:
                checker.unknown_field(named, (*base, "rules", index, "field"), fields)
            section = getattr(rule, "section", None)
            if section is not None and section not in fields:
                checker.unknown_field(section, (*base, "rules", index, "section"), fields)
        for index, out in enumerate(contract.output):
            if out.field is not None and out.field not in fields:
                checker.unknown_field(out.field, (*base, "output", index, "field"), fields)
            if out.param is not None and out.param not in contract.params:
                checker.add(
                    UNKNOWN_PARAM,
                    f"output uses param {out.param!r}, not declared",
                    (*base, "output", index, "param"),
                    "declare it under `params:`",
                )
        for index, warning in enumerate(contract.warnings):
            spec = fields.get(warning.section)
            if spec is None or spec.form != "section":
                checker.unknown_field(
                    warning.section,
                    (*base, "warnings", index, "section"),
                    {k: v for k, v in fields.items() if v.form == "section"},
                )

    def pack_inputs(self, contract: SentinelContract, pack: Rulepack) -> dict[str, Any]:
        """The grammar the pack's sentinel contracts share (``sentinel:``)."""
        grammar: dict[str, Any] = pack.sentinel.model_dump(mode="json")
        return grammar

    def parser_data(self, contract: SentinelContract, pack: Rulepack) -> dict[str, Any]:
        """What ``parser_from_data`` rebuilds the contract's parser from, as plain data."""
        return {
            "contract": contract.model_dump(mode="json"),
            "grammar": pack.sentinel.model_dump(mode="json"),
        }

    def parser_from_data(self, name: str, data: Mapping[str, Any]) -> SentinelParser:
        return parser_from_data(name, data)

    def compile(
        self,
        name: str,
        contract: SentinelContract,
        pack: Rulepack,
        folder_of: Callable[[KeyPath], Path],
    ) -> CompiledSentinel:
        severities = {n: ft.severity for n, ft in pack.failure_types.items()}
        return CompiledSentinel(
            name,
            SentinelParser(name, contract, pack.sentinel),
            frozenset(contract.params),
            severities,
        )


KIND = SentinelKind()
