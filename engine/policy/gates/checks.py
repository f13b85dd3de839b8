"""The checks of the ``gates:`` section (section.py declares it): what gate conditions may
see, schema files, schema names, template purposes, the output file and the log."""

from __future__ import annotations

from typing import TYPE_CHECKING

import jinja2

from engine.contracts.json_schemas import INVALID_SCHEMA, read_schema_file, schema_problems
from engine.core.files import path_problem
from engine.core.suggest import did_you_mean
from engine.format.fields import Ref
from engine.format.findings import FindingRule
from engine.format.section import Declared, single
from engine.format.semantics import (
    NO_BEHAVIOUR,
    PATH_TRAVERSAL,
    TEMPLATE_SYNTAX,
    UNKNOWN_TEMPLATE_VARIABLE,
)
from engine.policy.gates.model import Gates
from engine.sandbox.environment import undeclared_names

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


GATES_NO_DETECTION = FindingRule(
    "gates-no-detection",
    "Gates without detection rules.",
    "Add `gates.detect` rules.",
)

GATES_NO_DECISION = FindingRule(
    "gates-no-decision",
    "Gates without decision rules.",
    "Add `gates.decide` rules.",
)

GATES_EMPTY_LOG = FindingRule(
    "gates-empty-log",
    "A gate log with an empty path.",
    "Give `gates.log` a file path.",
)

UNKNOWN_SCHEMA = FindingRule(
    "unknown-schema",
    "A gate names a schema that is not declared.",
    "Declare it under `gates.schemas`.",
)

TEMPLATE_PURPOSE = FindingRule(
    "template-purpose",
    "A gate uses a template of another purpose.",
    "Give it `purpose: reprompt` or `artifact`.",
)

# Variables of the gates' decision rules, and of their detection rules (with the context).
GATE_VARIABLES: frozenset[str] = frozenset(
    {
        "gate",
        "valid",
        "errors",
        "missing",
        "checked",
        "retry",
        "max_retry",
        "context",
    }
)
DETECT_VARIABLES: frozenset[str] = frozenset({"output", "context"})

# What the output-file pattern may use.
OUTPUT_FILE_VARIABLES = frozenset({"gate", "retry"})


def check_gates(pack: Rulepack, checker: PackChecker) -> None:
    """Findings for the ``gates:`` section beyond the generic reference walk: decision and
    detection rules use only their variables; when the pack declares gates, schema files
    are valid JSON Schemas with local references only, schema names exist, templates have
    the right purpose, the output-file pattern compiles, a gate table has decision rules."""
    checker.expressions(
        "gates", {Ref.GATE_EXPRESSION: GATE_VARIABLES, Ref.DETECT_EXPRESSION: DETECT_VARIABLES}
    )
    spec = pack.gates
    if spec == Gates():
        return
    names = spec.schemas

    def schema_ref(name: str, path: tuple[str | int, ...]) -> None:
        if name in names:
            return
        checker.add(
            UNKNOWN_SCHEMA,
            f"unknown gate schema {name!r}",
            path,
            did_you_mean(name, names, "declare it under `gates.schemas:`"),
        )

    for name, schema in names.items():
        path: tuple[str | int, ...] = ("gates", "schemas", name, "file")
        target = checker.quiet_resolve(schema.file, path)
        if target is None:
            continue
        try:
            document = read_schema_file(target)
        except (ValueError, UnicodeDecodeError) as exc:
            checker.add(INVALID_SCHEMA, f"schema {name!r}: {exc}", path, "fix the JSON syntax")
            continue
        for problem in schema_problems(document):
            checker.add(INVALID_SCHEMA, f"schema {name!r}: {problem}", path, "fix the schema")
    for gate, required in spec.steps.items():
        for index, name in enumerate(required):
            schema_ref(name, ("gates", "steps", gate, index))
    for index, rule in enumerate(spec.detect):
        schema_ref(rule.schema_name, ("gates", "detect", index))
    for action, artifact in spec.artifacts.items():
        schema_ref(artifact.schema_name, ("gates", "artifacts", action))
        _purpose(checker, artifact.template, "artifact", ("gates", "artifacts", action, "template"))
    if spec.reprompt:
        _purpose(checker, spec.reprompt, "reprompt", ("gates", "reprompt"))
    if not spec.steps:
        checker.add(
            NO_BEHAVIOUR,
            "`gates` without `steps` has no effect: no gate can run",
            ("gates",),
            "declare `gates.steps:` (gate name -> required schemas)",
            is_key=True,
            level="warning",
        )
        return
    if spec.steps and not spec.decide:
        checker.add(
            GATES_NO_DECISION,
            "gates declare no decision rules",
            ("gates", "steps"),
            "add `gates.decide:` rules, the last one with `when: 'true'`",
        )
    if spec.steps and not spec.detect:
        checker.add(
            GATES_NO_DETECTION,
            "gates declare no detection rules: no output can be checked",
            ("gates", "steps"),
            "add `gates.detect:` rules",
        )
    if spec.output_file:
        try:
            used = undeclared_names(spec.output_file)
        except jinja2.TemplateError as exc:
            checker.add(
                TEMPLATE_SYNTAX,
                f"gates.output_file: {exc}",
                ("gates", "output_file"),
                "fix the Jinja2 syntax",
            )
        else:
            for unknown in sorted(used - OUTPUT_FILE_VARIABLES):
                checker.add(
                    UNKNOWN_TEMPLATE_VARIABLE,
                    f"gates.output_file uses {unknown!r}",
                    ("gates", "output_file"),
                    f"it may use: {', '.join(sorted(OUTPUT_FILE_VARIABLES))}",
                )
    if spec.log and (unusable := path_problem(spec.log)) is not None:
        checker.add(
            PATH_TRAVERSAL,
            f"gates.log {spec.log[:200]!r} is no usable file name: {unusable}",
            ("gates", "log"),
            "write a relative path of plain characters",
        )
    elif spec.log:
        parts = spec.log.replace("\\", "/").split("/")
        if spec.log.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
            checker.add(
                PATH_TRAVERSAL,
                f"gates.log {spec.log!r} must stay inside the session folder",
                ("gates", "log"),
                "write a relative path without '..'",
            )
    elif spec.steps and spec.log == "" and "log" in spec.model_fields_set:
        checker.add(
            GATES_EMPTY_LOG,
            "gates.log is empty",
            ("gates", "log"),
            "remove the key or name a file",
        )


def _purpose(checker: PackChecker, name: str, purpose: str, path: tuple[str | int, ...]) -> None:
    checker.template_purpose(
        name,
        purpose,
        path,
        TEMPLATE_PURPOSE,
        "template {name!r} has purpose {declared!r}; this needs purpose {purpose!r}",
    )


def declared() -> Declared:
    """The ``gates:`` section in the root model (section.py names it)."""
    return single(Gates, check_gates)
