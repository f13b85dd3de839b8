"""JSON documents in model outputs: finding them, reading them within bounds, and checking
them against JSON Schemas with readable, deterministic violations.

Used by the ``json`` contract kind and by quality gates. Nothing here raises for anything an
output can contain: a document that cannot be read is a ``JsonDocumentError`` carrying the
line and column (in the whole output) where reading failed.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from engine.contracts.json.keywords import linear_keywords, pattern_problems
from engine.core.files import read_file_capped
from engine.core.textio import holds_lone_surrogate
from engine.format.findings import FindingRule

INVALID_SCHEMA = FindingRule(
    "invalid-schema",
    "A JSON Schema that is invalid or refers outside itself.",
    "Fix the schema; `$ref`s stay inside it.",
)

Extract = Literal["auto", "whole", "fenced", "first"]
Many = Literal["one", "list", "jsonl"]

MAX_CHARS = 8 * 1024 * 1024
"""Default cap on the characters of JSON read from one output."""
MAX_DEPTH = 200
"""Default cap on nesting (objects and arrays) of one document."""
MAX_DOCUMENTS = 10_000
"""Default cap on the documents of one output read as a list or as JSON lines."""
MAX_VIOLATIONS = 100
"""At most this many schema violations are reported per document (the first, in order)."""
_MAX_MESSAGE = 300
_MAX_CANDIDATES = 64

_MAX_NUMBER_CHARS = 400
"""A number written with more characters is refused unread: no integer past the range of a
JSON number (about 1.8e308, 309 digits) is that long, and converting a number of millions of
digits takes quadratic time."""
_FLOAT_MAX = sys.float_info.max

_FENCE = re.compile(r"^[ \t]*```[ \t]*json[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
_FENCE_END = re.compile(r"^[ \t]*```[ \t]*\r?$", re.MULTILINE)
_ANY_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?$", re.MULTILINE)
_JSON_FENCES = ("", "json")
_NAMED_BLOCKS = 5


class JsonDocumentError(Exception):
    """JSON that cannot be read: the message, and where in the output (1-based)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        where = f"line {line} column {column}: " if line is not None else ""
        super().__init__(where + message)
        self.message = where + message
        self.line = line
        self.column = column


class SchemaViolation(NamedTuple):
    """One way a document breaks its schema: a JSON Pointer and a readable message."""

    pointer: str
    message: str
    summary: bool = False
    """True for the last entry of a cut list: how many more violations there are."""


class _Refused:
    """Stands in a decoded document for a number it cannot hold; says why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Numbers:
    """A JSON decoder whose numbers are bounded: a NaN, an infinity, a number beyond the
    range of a JSON number or written with too many characters becomes a ``_Refused``, and
    ``refused`` says whether any did (so documents are searched for one only then)."""

    def __init__(self) -> None:
        self.refused = False
        self.decoder = json.JSONDecoder(
            parse_int=self._int, parse_float=self._float, parse_constant=self._constant
        )

    def _refuse(self, reason: str) -> _Refused:
        self.refused = True
        return _Refused(reason)

    def _int(self, text: str) -> int | _Refused:
        if len(text) < 300:  # the common case: no integer of 299 characters is out of range
            return int(text)
        if len(text) > _MAX_NUMBER_CHARS:
            return self._refuse(
                f"a number of {len(text)} digits is too long (numbers here are within ±1.8e308)"
            )
        number = int(text)
        if abs(number) > _FLOAT_MAX:
            return self._refuse(f"a number of {len(text)} digits is beyond ±1.8e308")
        return number

    def _float(self, text: str) -> float | _Refused:
        number = float(text)
        if number - number == 0.0:  # finite (an infinity gives NaN)
            return number
        return self._refuse(f"{text[:40]} is beyond ±1.8e308")

    def _constant(self, name: str) -> _Refused:
        return self._refuse(f"{name} is not a JSON number (NaN and infinities are refused)")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = "a lone surrogate (a \\ud800-\\udfff escape alone) is not text"


def _first_refused(value: Any, texts: bool = False) -> tuple[str, str] | None:
    """The dotted path of the first refused number in ``value`` (with ``texts``, or string
    or key holding a lone surrogate), and why."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Refused):
            return _dotted(path) or "(root)", node.reason
        if texts and isinstance(node, str) and holds_lone_surrogate(node):
            return _dotted(path) or "(root)", _LONE_SURROGATE
        if texts and isinstance(node, dict) and any(map(holds_lone_surrogate, node)):
            return _dotted(path) or "(root)", "a key holding " + _LONE_SURROGATE
        if isinstance(node, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(node))))
    return None


def _line_column(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _decode(text: str, start: int, end: int, whole: str, decoder: json.JSONDecoder) -> Any:
    """The one JSON value in ``text[start:end]`` (whitespace around it allowed). Only that
    part is copied: one line of JSON lines costs its own length, not the text before it."""
    part = text[start:end]
    try:
        value, stop = decoder.raw_decode(part, _skip_space(part, 0, len(part)))
    except json.JSONDecodeError as exc:
        raise JsonDocumentError(exc.msg, *_line_column(whole, start + exc.pos)) from None
    except RecursionError:
        raise JsonDocumentError("JSON nested too deeply") from None
    rest = _skip_space(part, stop, len(part))
    if rest < len(part):
        raise JsonDocumentError(
            "extra data after the JSON value", *_line_column(whole, start + rest)
        )
    return value


def _skip_space(text: str, start: int, end: int) -> int:
    while start < end and text[start] in " \t\r\n":
        start += 1
    return start


def _auto_body(text: str) -> tuple[int, int]:
    """The whole output, or the only ```json (or bare ```) fenced block in it, prose around
    it ignored; two or more such blocks are an error naming their lines (blocks of another
    language are skipped)."""
    whole = (1 if text.startswith("\ufeff") else 0), len(text)
    if "```" not in text:
        return whole
    blocks: list[tuple[int, int]] = []  # (start, end) of each JSON fenced block
    lines: list[int] = []  # the opening line of the first few, to name them
    position = line = 0
    while (opener := _ANY_FENCE.search(text, position)) is not None:
        json_fence = opener.group(1).lower() in _JSON_FENCES
        start = min(opener.end() + 1, len(text))
        close = _FENCE_END.search(text, start)
        if close is None:
            if json_fence:
                raise JsonDocumentError(
                    "the fenced block is not closed (no ``` line after it)",
                    *_line_column(text, opener.start()),
                )
            break
        if json_fence:
            blocks.append((start, close.start()))
            if len(lines) < _NAMED_BLOCKS:  # counted from the last one: linear in the text
                line += text.count("\n", position, opener.start()) + 1
                lines.append(line)
                line += text.count("\n", opener.start(), close.end()) - 1
        elif len(lines) < _NAMED_BLOCKS:
            line += text.count("\n", position, close.end())
        position = close.end()
    if not blocks:
        return whole
    if len(blocks) > 1:
        named = ", ".join(str(n) for n in lines[:-1]) + f" and {lines[-1]}"
        if len(blocks) > len(lines):
            named = ", ".join(str(n) for n in lines) + " and more"
        raise JsonDocumentError(
            f"the output holds {len(blocks)} fenced blocks, at lines {named}: write one JSON "
            "document, alone or in one ```json block"
        )
    return blocks[0]


def _body(text: str, extract: Extract) -> tuple[int, int]:
    """Where the JSON text is: (start, end) offsets into ``text``."""
    if extract == "auto":
        return _auto_body(text)
    if extract == "fenced":
        fence = _FENCE.search(text)
        if fence is None:
            raise JsonDocumentError("no ```json fenced block in the output")
        start = fence.end() + 1
        close = _FENCE_END.search(text, start)
        if close is None:
            raise JsonDocumentError(
                "the ```json fenced block is not closed", *_line_column(text, fence.start())
            )
        return start, close.start()
    return (1 if text.startswith("\ufeff") else 0), len(text)


def _first_value(text: str, decoder: json.JSONDecoder) -> Any:
    """The first balanced top-level object or array in ``text`` (prose around it ignored)."""
    tried = 0
    for match in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            tried += 1
            if tried >= _MAX_CANDIDATES:
                break
            continue
        except RecursionError:
            raise JsonDocumentError(
                "JSON nested too deeply", *_line_column(text, match.start())
            ) from None
        return value
    raise JsonDocumentError("no JSON object or array in the output")


def read_documents(
    text: str,
    *,
    extract: Extract = "whole",
    many: Many = "one",
    max_chars: int = MAX_CHARS,
    max_depth: int = MAX_DEPTH,
    max_documents: int = MAX_DOCUMENTS,
) -> list[Any]:
    """The JSON documents of an output: one, each element of a list, or one per line (at
    most ``max_documents`` of them: past it, reading stops with a ``JsonDocumentError``)."""
    too_many = (
        f"the output holds more than {max_documents} JSON documents, over the "
        "contract's limit (max_documents)"
    )
    if len(text) > max_chars:
        raise JsonDocumentError(
            f"the output is {len(text)} characters, over the limit of {max_chars} for JSON"
        )
    numbers = _Numbers()
    decoder = numbers.decoder
    if extract == "first":
        values = [_first_value(text, decoder)]
    else:
        start, end = _body(text, extract)
        if many == "jsonl":
            values = []
            for line_start, line_end in _lines(text, start, end):
                if text[line_start:line_end].strip():
                    if len(values) >= max_documents:
                        raise JsonDocumentError(too_many)
                    values.append(_decode(text, line_start, line_end, text, decoder))
        else:
            values = [_decode(text, start, end, text, decoder)]
    if many == "list":
        if len(values) != 1 or not isinstance(values[0], list):
            raise JsonDocumentError("expected a JSON array of documents")
        if len(values[0]) > max_documents:
            raise JsonDocumentError(too_many)
        values = list(values[0])
    texts = _SURROGATE_ESCAPE.search(text) is not None  # only escapes make lone surrogates
    for index, value in enumerate(values):
        if depth_of(value, max_depth) > max_depth:
            raise JsonDocumentError(f"JSON nested deeper than {max_depth} levels")
        refused = _first_refused(value, texts) if numbers.refused or texts else None
        if refused is not None:
            item = f"item {index + 1}: " if many != "one" else ""
            raise JsonDocumentError(f"{item}{refused[0]}: {refused[1]}")
    return values


def _lines(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    while start < end:
        stop = text.find("\n", start, end)
        stop = end if stop < 0 else stop
        yield start, stop
        start = stop + 1


def depth_of(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counted without recursion; stops past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


# ------------------------------------------------------------------------- schemas

MAX_SCHEMA_BYTES = 4 * 1024 * 1024
"""Cap on the size of one JSON Schema file of a pack."""


def read_schema_file(path: Path) -> Any:
    """A pack's schema file as JSON; ``ValueError`` saying why it cannot be read."""
    try:
        data, more = read_file_capped(path, MAX_SCHEMA_BYTES)
        if more:
            raise ValueError(f"schema file is over {MAX_SCHEMA_BYTES} bytes")
        text = data.decode("utf-8")
        numbers = _Numbers()
        schema = numbers.decoder.decode(text)
    except (OSError, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(f"schema file cannot be read as JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"schema file is not valid JSON: {exc}") from None
    refused = _first_refused(schema) if numbers.refused else None
    if refused is not None:
        raise ValueError(f"schema file holds a number it cannot: {refused[0]}: {refused[1]}")
    return schema


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


def _dotted(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


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
                violations.append(
                    SchemaViolation(
                        _pointer([*path, missing]), f"Missing: {_dotted([*path, missing])}"
                    )
                )
            else:
                where = _dotted(path) or "(root)"
                violations.append(
                    SchemaViolation(_pointer(path), _short(f"{where}: {error.message}"))
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


def _missing_key(error: Any) -> str:
    """The property a ``required`` error is about (jsonschema says it in its message)."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    required = error.validator_value if isinstance(error.validator_value, list) else []
    for key in required:
        if key not in instance and repr(key) in error.message:
            return str(key)
    message: str = error.message
    return message.rsplit(" is a required property", 1)[0].strip("'\"")


def output_documents(name: str, text: str) -> tuple[list[Any], str | None]:
    """The JSON documents of one output named ``name`` (a document, an array of them, or
    JSON lines), or the error a quality gate reports for it ("Invalid JSON: NAME:L:C: ...")."""
    try:
        documents = read_documents(text)
        if len(documents) == 1 and isinstance(documents[0], list):
            documents = list(documents[0])
        return documents, None
    except JsonDocumentError as whole:
        try:
            return read_documents(text, many="jsonl"), None
        except JsonDocumentError as lines:
            first = whole if "extra data" not in str(whole) else lines
    if first.line is None:
        return [], f"Invalid JSON: {name}: {first.message}"
    prefix = f"line {first.line} column {first.column}: "
    message = first.message[len(prefix) :] if first.message.startswith(prefix) else first.message
    return [], f"Invalid JSON: {name}:{first.line}:{first.column}: {message}"
