"""JSON documents in model outputs: finding them and reading them within bounds (checking
them against JSON Schemas: ``engine.contracts.json_schemas``).

Used by the ``json`` contract kind and by quality gates. Nothing here raises for anything an
output can contain: a document that cannot be read is a ``JsonDocumentError`` carrying the
line and column (in the whole output) where reading failed.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any, Literal

from engine.core.textio import holds_lone_surrogate

Extract = Literal["auto", "whole", "fenced", "first"]
Many = Literal["one", "list", "jsonl"]

MAX_CHARS = 8 * 1024 * 1024
"""Default cap on the characters of JSON read from one output."""
MAX_DEPTH = 200
"""Default cap on nesting (objects and arrays) of one document."""
MAX_DOCUMENTS = 10_000
"""Default cap on the documents of one output read as a list or as JSON lines."""
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
            return dotted(path) or "(root)", node.reason
        if texts and isinstance(node, str) and holds_lone_surrogate(node):
            return dotted(path) or "(root)", _LONE_SURROGATE
        if texts and isinstance(node, dict) and any(map(holds_lone_surrogate, node)):
            return dotted(path) or "(root)", "a key holding " + _LONE_SURROGATE
        if isinstance(node, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(node.items()))
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(node))))
    return None


def dotted(parts: Any) -> str:
    """A path in a document as ``a.b.0``."""
    return ".".join(str(p) for p in parts)


def decode_bounded(text: str) -> Any:
    """``text`` as one JSON value with its numbers within bounds: ``json.JSONDecodeError``
    for JSON that does not parse, ``ValueError`` naming the first number refused and where."""
    numbers = _Numbers()
    value = numbers.decoder.decode(text)
    refused = _first_refused(value) if numbers.refused else None
    if refused is not None:
        raise ValueError(f"{refused[0]}: {refused[1]}")
    return value


def decode_error(exc: json.JSONDecodeError, whole: str) -> JsonDocumentError:
    """A decoder's error in ``whole`` (its ``pos`` an index of it), worded as reading an
    output words it, with its line and column."""
    return JsonDocumentError(_whole(exc), *_line_column(whole, exc.pos))


def _line_column(text: str, position: int) -> tuple[int, int]:
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def _decode(text: str, start: int, end: int, whole: str, decoder: json.JSONDecoder) -> Any:
    """The one JSON value in ``text[start:end]`` (whitespace around it allowed). Only that
    part is copied: one line of JSON lines costs its own length, not the text before it."""
    part = text[start:end]
    first = _skip_space(part, 0, len(part))
    try:
        value, stop = decoder.raw_decode(part, first)
    except json.JSONDecodeError as exc:
        if _no_json(whole, part, first):
            raise JsonDocumentError(_NO_JSON) from None
        _text_around(part, start, whole, decoder)
        raise JsonDocumentError(_whole(exc), *_line_column(whole, start + exc.pos)) from None
    except RecursionError:
        raise JsonDocumentError("JSON nested too deeply") from None
    rest = _skip_space(part, stop, len(part))
    if rest < len(part):
        if _no_json(whole, part, first):
            raise JsonDocumentError(_NO_JSON) from None
        if not isinstance(value, (dict, list)):
            _text_around(part, start, whole, decoder)
        raise JsonDocumentError(
            "extra data after the JSON value", *_line_column(whole, start + rest)
        )
    return value


def _text_around(part: str, start: int, whole: str, decoder: json.JSONDecoder) -> None:
    """When prose wraps a whole JSON object or array, say so (the near miss of a JSON
    output) instead of the decoder's first complaint about the prose."""
    tried = 0
    for match in re.finditer(r"[{\[]", part):
        try:
            value, _ = decoder.raw_decode(part, match.start())
        except (json.JSONDecodeError, RecursionError):
            tried += 1
            if tried >= _MAX_CANDIDATES:
                return
            continue
        kind = "object" if isinstance(value, dict) else "array"
        line, column = _line_column(whole, start + match.start())
        raise JsonDocumentError(
            f"the JSON {kind} that starts here has text around it: write only the JSON "
            f"{kind}, with nothing before or after it",
            line,
            column,
        )


_NO_JSON = "no JSON found: the output is text, with no JSON object or array in it"


def _no_json(whole: str, part: str, first: int) -> bool:
    """Whether an output whose ``part`` failed to read as JSON holds none at all: no object
    or array anywhere in the output, and the part is not a string either (prose such as
    ``2 + 2 = 5`` starts like a number)."""
    return not part.startswith('"', first) and "{" not in whole and "[" not in whole


_CONTROL_NAMES = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}


def _whole(exc: json.JSONDecodeError) -> str:
    """The decoder's message as a whole sentence: two of Python's end in "at" and name
    nothing after it, which reads as cut off."""
    if exc.msg == "Invalid control character at":
        char = exc.doc[exc.pos] if exc.pos < len(exc.doc) else ""
        name = _CONTROL_NAMES.get(char, f"U+{ord(char):04X}" if char else "a control character")
        escape = "\\n" if char == "\n" else "escaped"
        return (
            f"invalid control character ({name}) inside a string: write it {escape} or leave it out"
        )
    if exc.msg == "Unterminated string starting at":
        return 'unterminated string: the string that starts here has no closing "'
    return exc.msg


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


def described_type(value: Any) -> str:
    """A decoded JSON value's type as a sentence says it ("a string", "an object"): the
    schema sentences and the tool-call problems name what the model wrote this way."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"
