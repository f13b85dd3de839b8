"""Quality gates: outputs (JSON values) checked against the pack's JSON Schemas, the schemas
each gate requires, an action from ordered rules, and the reprompt and artifact that go with
a failure.

Everything is compiled once at load (``compile_gates``): schema validators, detection and
decision expressions, the reprompt, artifact and output-file templates. Running a gate reads
no pack file and compiles nothing.

A gate's result, in the pack's terms: ``checked`` lists the schema of every output that
matched a detection rule (in output order), ``errors`` holds each output's schema violations
prefixed ``[schema] `` and then ``Missing required schema: NAME`` for each schema the gate
requires that no output matched. Outputs no detection rule matches are not checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from engine.contracts.json_schemas import compile_schema, read_schema_file, schema_violations
from engine.core.clock import compact, iso
from engine.core.errors import ConditionError, Locate, PackError, RenderError
from engine.core.suggest import did_you_mean
from engine.format.actions import STANDARD_ACTIONS
from engine.policy.gates.inputs import GateError, GateInput
from engine.sandbox.environment import ENVIRONMENT, compile_condition

if TYPE_CHECKING:
    from datetime import datetime

    from engine.format.model import Rulepack
    from engine.format.section import Compiling
    from engine.format.vocabulary import ActionSpec
    from engine.policy.gates.model import Gates


@dataclass(frozen=True)
class CompiledDetect:
    schema: str
    has: tuple[str, ...]
    key: str | None
    equals: Any
    when: Callable[..., Any] | None

    def matches(self, output: Any, context: Mapping[str, Any]) -> bool:
        if self.has and not (isinstance(output, dict) and all(k in output for k in self.has)):
            return False
        if self.key is not None and not (
            isinstance(output, dict) and self.key in output and output[self.key] == self.equals
        ):
            return False
        if self.when is not None:
            try:
                return bool(self.when(**{**context, "context": dict(context), "output": output}))
            except ConditionError:
                return False  # an expression that cannot apply to this output: no match
        return True


@dataclass(frozen=True)
class CompiledRule:
    when: Callable[..., Any]
    action: str
    reason: str
    source: str


@dataclass(frozen=True)
class OutputResult:
    """One output that matched a schema: which, and its violations."""

    schema: str
    valid: bool
    errors: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, "valid": self.valid, "errors": list(self.errors)}


@dataclass(frozen=True)
class GateResult:
    """What a gate found and decided."""

    gate: str
    valid: bool
    checked: tuple[str, ...]
    errors: tuple[str, ...]
    missing: tuple[str, ...]
    outputs: tuple[OutputResult, ...]
    action: str
    reason: str
    retry: int
    max_retry: int
    exit_code: int


@dataclass(frozen=True)
class GateOutcome:
    """A gate's result with what it produced: the reprompt and the artifact (or None)."""

    result: GateResult
    timestamp: str
    reprompt: str | None
    artifact: dict[str, Any] | None


@dataclass(frozen=True)
class CompiledGates:
    """A pack's gates, ready to run."""

    spec: Gates
    validators: Mapping[str, Any]
    detect: tuple[CompiledDetect, ...]
    rules: tuple[CompiledRule, ...]
    actions: Mapping[str, ActionSpec]
    reprompt: jinja2.Template | None
    artifacts: Mapping[str, tuple[jinja2.Template, str]]
    output_file: jinja2.Template | None
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.spec.steps)

    def schema_of(self, output: Any, context: Mapping[str, Any]) -> str | None:
        """The schema of the first detection rule ``output`` matches (None: no rule)."""
        for rule in self.detect:
            if rule.matches(output, context):
                return rule.schema
        return None

    def check(self, given: GateInput) -> GateResult:
        """Detect, validate and decide."""
        gate, retry = given.gate, given.retry
        required = self.required(gate)
        values = dict(given.context)
        errors: list[str] = list(given.input_errors)
        checked: list[str] = []
        results: list[OutputResult] = []
        for output in given.outputs:
            schema = self.schema_of(output, values)
            if schema is None:
                continue
            violations = [
                f"[{schema}] {violation.message}"
                for violation in schema_violations(self.validators[schema], output)
            ]
            checked.append(schema)
            results.append(OutputResult(schema, not violations, tuple(violations)))
            errors.extend(violations)
        missing = [name for name in required if name not in checked]
        errors.extend(f"Missing required schema: {name}" for name in missing)
        valid = not errors
        variables = {
            **values,
            "context": values,
            "gate": gate,
            "valid": valid,
            "errors": list(errors),
            "missing": list(missing),
            "checked": list(checked),
            "retry": retry,
            "max_retry": self.spec.max_retry,
        }
        for rule in self.rules:
            try:
                holds = rule.when(**variables)
            except ConditionError as exc:
                where = f"{exc.position}: " if exc.position else ""
                raise GateError(
                    f"{where}gates.decide rule {rule.source!r} failed: {exc.reason}"
                ) from None
            if holds:
                spec = self.actions[rule.action]
                return GateResult(
                    gate,
                    valid,
                    tuple(checked),
                    tuple(errors),
                    tuple(missing),
                    tuple(results),
                    rule.action,
                    rule.reason or rule.source,
                    retry,
                    self.spec.max_retry,
                    spec.exit_code,
                )
        raise GateError(
            f"no decision rule of the gates applies (gate {gate!r}, valid "
            f"{valid}, retry {retry}, {len(errors)} errors): end `gates.decide` "
            "with a rule that always holds, e.g. `when: 'true'`"
        )

    def required(self, gate: str) -> list[str]:
        if gate not in self.spec.steps:
            suggestion = did_you_mean(gate, self.names)
            hint = f"{suggestion} " if suggestion else ""
            raise GateError(
                f"unknown gate {gate!r} ({hint}gates: {', '.join(self.names) or 'none'})"
            )
        return list(self.spec.steps[gate])

    def output_path(self, gate: str, retry: int) -> str:
        if self.output_file is None:
            return ""
        return self.output_file.render(gate=gate, retry=retry)

    def run(self, given: GateInput, now: datetime) -> GateOutcome:
        """Check, decide, and build the artifact and reprompt the action calls for."""
        gate, retry, values = given.gate, given.retry, dict(given.context)
        result = self.check(given)
        stamp = iso(now)
        variables: dict[str, Any] = {
            **values,
            "context": values,
            "gate": gate,
            "action": result.action,
            "valid": result.valid,
            "errors": list(result.errors),
            "missing": list(result.missing),
            "checked": list(result.checked),
            "outputs": [o.to_json() for o in result.outputs],
            "retry": retry,
            "max_retry": result.max_retry,
            "timestamp": stamp,
            "timestamp_compact": compact(now),
            "output_file": self.output_path(gate, retry),
        }
        artifact = self._artifact(result.action, variables)
        reprompt = None
        if result.action != "PROCEED" and self.reprompt is not None:
            reprompt = _render(
                self.reprompt,
                "the reprompt",
                {**variables, "descriptions": dict(self.descriptions), "artifact": artifact},
            )
        return GateOutcome(result, stamp, reprompt, artifact)

    def _artifact(self, action: str, variables: Mapping[str, Any]) -> dict[str, Any] | None:
        entry = self.artifacts.get(action)
        if entry is None:
            return None
        template, schema = entry
        text = _render(template, f"the {action} artifact", variables)
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise GateError(f"the {action} artifact template does not give JSON: {exc}") from None
        violations = schema_violations(self.validators[schema], document)
        if violations:
            listed = "; ".join(violation.message for violation in violations[:10])
            raise GateError(
                f"the {action} artifact does not validate against schema {schema!r}: {listed}"
            )
        if not isinstance(document, dict):
            raise GateError(f"the {action} artifact must be a JSON object")
        return document


def _render(template: jinja2.Template, what: str, variables: Mapping[str, Any]) -> str:
    try:
        return template.render(**variables)
    except (jinja2.TemplateError, RenderError) as exc:
        raise GateError(f"cannot render {what}: {exc}") from None


FolderOf = Callable[[tuple[str | int, ...]], Path]


def compile_gates(
    pack: Rulepack,
    folder_of: FolderOf,
    templates: Mapping[str, jinja2.Template],
    locate: Locate | None = None,
) -> CompiledGates | None:
    """The pack's gates compiled (None when it declares none); ``templates`` are the pack's
    compiled templates, ``locate`` gives the places of its conditions for their errors."""

    def condition(expression: str, *path: str | int) -> Callable[..., Any]:
        return compile_condition(expression, locate(("gates", *path)) if locate else None)

    spec = pack.gates
    if not spec.steps:
        return None
    validators = {}
    for name, schema in spec.schemas.items():
        path = folder_of(("gates", "schemas", name, "file")) / schema.file
        try:
            validators[name] = compile_schema(read_schema_file(path))
        except (OSError, ValueError) as exc:
            raise PackError(f"{path}: cannot read the JSON Schema {name!r}: {exc}") from None
    try:
        output_file = ENVIRONMENT.from_string(spec.output_file) if spec.output_file else None
    except jinja2.TemplateError as exc:
        raise PackError(f"gates.output_file does not compile: {exc}") from None
    return CompiledGates(
        spec=spec,
        validators=validators,
        detect=tuple(
            CompiledDetect(
                rule.schema_name,
                tuple(rule.has),
                rule.key,
                rule.equals,
                condition(rule.when, "detect", index, "when") if rule.when else None,
            )
            for index, rule in enumerate(spec.detect)
        ),
        rules=tuple(
            CompiledRule(
                condition(rule.when, "decide", index, "when"), rule.action, rule.reason, rule.when
            )
            for index, rule in enumerate(spec.decide)
        ),
        actions={**STANDARD_ACTIONS, **pack.actions},
        reprompt=templates[spec.reprompt] if spec.reprompt else None,
        artifacts={
            action: (templates[a.template], a.schema_name) for action, a in spec.artifacts.items()
        },
        output_file=output_file,
        descriptions={name: s.description for name, s in spec.schemas.items()},
    )


def compile_section(pack: Rulepack, compiling: Compiling) -> CompiledGates | None:
    """The gates with the pack's templates (None when the pack declares no gate)."""
    if not pack.gates.steps:
        return None
    templates = compiling.section("templates").templates
    return compile_gates(pack, compiling.folder_of, templates, compiling.locate)
