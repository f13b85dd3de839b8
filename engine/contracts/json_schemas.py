"""JSON Schemas of a pack: reading a schema file within bounds, checking it, compiling a
validator that resolves nothing outside the schema, and every violation of a document as a
readable, deterministic list.

Used by the ``json`` contract kind and by quality gates.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.contracts.json_documents import decode_bounded, described_type, dotted
from engine.contracts.json_keywords import linear_keywords, pattern_problems
from engine.core.files import read_file_capped
from engine.format.findings import FindingRule

if TYPE_CHECKING:
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath

INVALID_SCHEMA = FindingRule(
    "invalid-schema",
    "A JSON Schema that is invalid or refers outside itself.",
    "Fix the schema; `$ref`s stay inside it.",
)

MAX_VIOLATIONS = 100
"""At most this many schema violations are reported per document (the first, in order)."""
_MAX_MESSAGE = 300


class SchemaViolation(NamedTuple):
    """One way a document breaks its schema: a JSON Pointer and a readable message."""

    pointer: str
    message: str
    summary: bool = False
    """True for the last entry of a cut list: how many more violations there are."""
    sentence: str = ""
    """The violation as a sentence a model can act on (what is wrong, what to write);
    ``message`` keeps the validator's own words for reports that quote them."""


MAX_SCHEMA_BYTES = 4 * 1024 * 1024
"""Cap on the size of one JSON Schema file of a pack."""


def read_schema_file(path: Path) -> Any:
    """A pack's schema file as JSON; ``ValueError`` saying why it cannot be read."""
    try:
        data, more = read_file_capped(path, MAX_SCHEMA_BYTES)
        if more:
            raise ValueError(f"schema file is over {MAX_SCHEMA_BYTES} bytes")
        return decode_bounded(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"schema file cannot be read as JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"schema file is not valid JSON: {exc}") from None
    except ValueError as exc:
        raise ValueError(f"schema file holds a number it cannot: {exc}") from None


def check_schema_file(checker: PackChecker, file: str, where: KeyPath) -> None:
    """The findings of the schema file a contract names at ``where``: one that cannot be
    read as JSON, or a schema the engine cannot use (a missing file is the generic walk's
    finding already)."""
    target = checker.quiet_resolve(file, where)
    if target is None:
        return
    try:
        schema = read_schema_file(target)
    except ValueError as exc:
        checker.add(INVALID_SCHEMA, str(exc), where, "fix the JSON syntax")
        return
    check_schema(checker, schema, where, f"schema file {file!r}")


def check_schema(checker: PackChecker, schema: Any, where: KeyPath, what: str) -> None:
    """One finding for each problem of ``schema`` (``what``: how the message names it)."""
    for problem in schema_problems(schema):
        checker.add(INVALID_SCHEMA, f"{what}: {problem}", where, "fix the schema")


def compile_schema(schema: Any) -> Any:
    """A validator for ``schema`` (Draft 2020-12 unless its ``$schema`` says otherwise).

    References resolve inside the schema only: no file and no network is ever read. Patterns
    and enums cost time linear in the document (``keywords``); ``ValueError`` for a pattern
    that cannot run so.
    """
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    import jsonschema
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]

    problems = pattern_problems(schema)
    if problems:
        raise ValueError(problems[0])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = linear_keywords(cls)
    return cls(schema, registry=Registry(retrieve=refuse))  # type: ignore[call-arg]


def schema_problems(schema: Any) -> list[str]:
    """Why ``schema`` is not usable: not a valid schema, or a ``$ref`` outside itself."""
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [f"not a valid JSON Schema: {exc.message}"]
    return [
        f"$ref {ref!r} points outside the schema (only local '#...' references are "
        "resolved; nothing is fetched)"
        for ref in _refs(schema)
        if not ref.startswith("#")
    ] + pattern_problems(schema)


def _refs(schema: Any) -> list[str]:
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                found.append(ref)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return sorted(set(found))


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 3] + "..."


def schema_violations(
    validator: Any, document: Any, limit: int = MAX_VIOLATIONS
) -> list[SchemaViolation]:
    """Every way ``document`` breaks the validator's schema, sorted by pointer then message:
    at most ``limit`` of them, then one saying how many more there are (``and N more schema
    errors``, pointer "").

    A missing required key reads ``Missing: parent.key``; any other violation reads
    ``path: message`` (``(root)`` for the document itself).
    """
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    from referencing.exceptions import Unresolvable

    violations: list[SchemaViolation] = []
    stopped = False
    try:
        for error in validator.iter_errors(document):
            path = list(error.absolute_path)
            if error.validator == "required":
                missing = _missing_key(error)
                key = dotted([*path, missing])
                violations.append(
                    SchemaViolation(
                        _pointer([*path, missing]),
                        f"Missing: {key}",  # seed 004's wording, whole as it is
                    )
                )
            else:
                where = dotted(path) or "(root)"
                violations.append(
                    SchemaViolation(
                        _pointer(path),
                        _short(f"{where}: {error.message}"),
                        sentence=_short(_sentence(error, where)),
                    )
                )
            if len(violations) >= 10 * limit:
                stopped = True
                break
    except RecursionError:
        violations.append(SchemaViolation("", "(root): JSON nested too deeply to validate"))
    except OverflowError:
        violations.append(SchemaViolation("", "(root): a number too large to check"))
    except Unresolvable as exc:
        violations.append(
            SchemaViolation("", f"(root): {exc} (references must resolve inside the schema)")
        )
    found = sorted(set(violations))
    if len(found) <= limit:
        return found
    more = len(found) - limit
    counted = f"more than {more}" if stopped else str(more)
    return [*found[:limit], SchemaViolation("", f"and {counted} more schema errors", summary=True)]


_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _sentence(error: Any, where: str) -> str:
    """A violation said so that a model can fix it: the key, what it holds, what it must."""
    name = "the document" if where == "(root)" else f"`{where}`"
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "enum" and isinstance(expected, list):
        allowed = ", ".join(_shown(v) for v in expected[:5])
        if len(expected) > 5:  # a long list is cut, as the validator's own message is
            allowed += f", ... ({len(expected)} values)"
        return f"{name} is {_shown(value)}: it must be one of {allowed}"
    if kind == "const":
        return f"{name} is {_shown(value)}: it must be {_shown(expected)}"
    if kind == "type":
        wanted = expected if isinstance(expected, list) else [expected]
        names = " or ".join(_TYPE_NAMES.get(str(t), str(t)) for t in wanted)
        return f"{name} is {described_type(value)}: it must be {names}"
    if kind == "minLength" and value == "":
        return f"{name} is empty: write it"
    if kind == "minLength":
        return f"{name} is too short: write at least {expected} characters"
    if kind == "maxLength":
        return f"{name} is too long: shorten it to {expected} characters at most"
    if kind == "pattern":
        return f"{name} is {_shown(value)}, which does not match the pattern {expected}"
    if (
        kind == "additionalProperties"
        and isinstance(value, dict)
        and not error.schema.get("patternProperties")
    ):
        known = error.schema.get("properties") or {}
        extra = ", ".join(f"`{k}`" for k in value if k not in known)
        return f"{name} has keys the contract does not allow: remove {extra or 'them'}"
    bounds = {
        "minimum": "at least",
        "exclusiveMinimum": "more than",
        "maximum": "at most",
        "exclusiveMaximum": "less than",
    }
    if kind in bounds:
        return f"{name} is {_shown(value)}: it must be {bounds[kind]} {_shown(expected)}"
    if kind == "minItems":
        return f"{name} has too few items: give at least {expected}"
    return f"{where}: {error.message}"


def _missing_key(error: Any) -> str:
    """The property a ``required`` error is about (jsonschema says it in its message)."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    required = error.validator_value if isinstance(error.validator_value, list) else []
    for key in required:
        if key not in instance and repr(key) in error.message:
            return str(key)
    message: str = error.message
    return message.rsplit(" is a required property", 1)[0].strip("'\"")
