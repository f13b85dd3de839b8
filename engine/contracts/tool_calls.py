"""Tool calls in model outputs, in every shape clients produce them: OpenAI chat
``tool_calls`` (arguments as a JSON string), OpenAI Responses ``function_call`` items,
Anthropic ``tool_use`` blocks (input as an object), a plain ``{name, arguments}``; alone,
in a list, or inside the whole response (``choices``, ``output``, ``content``).

The ``tool_call`` contract kind reads outputs with ``read_tool_calls``; a Python model call
that returns an SDK object instead of text is turned into the same JSON text by
``tool_calls_text`` (duck-typed: no SDK is imported), so both reach the kind alike.
Nothing here raises for anything an output can contain.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from engine.contracts.json_documents import (
    MAX_CHARS,
    MAX_DEPTH,
    JsonDocumentError,
    decode_bounded,
    depth_of,
    described_type,
    read_documents,
)

_NOT_CALLS = frozenset(
    {"text", "output_text", "message", "reasoning", "thinking", "redacted_thinking", "refusal"}
)
"""Item types of a response that are not tool calls (its text, its reasoning): passed over."""


class ToolCall(NamedTuple):
    """One tool call as the output gives it, whatever its shape."""

    position: int
    """Its place among the output's calls, from 0."""
    name: Any
    """The tool it names (a string unless the output is wrong)."""
    arguments: Any
    """The arguments as JSON data, or None when ``problem`` says they could not be read."""
    problem: str | None = None
    """Why the arguments are not JSON data (they are a string that does not decode)."""


class ToolCallsError(Exception):
    """An output that holds no readable tool calls: the message, and its line when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def read_tool_calls(
    text: str, *, max_chars: int = MAX_CHARS, max_depth: int = MAX_DEPTH
) -> tuple[list[ToolCall], list[str]]:
    """The tool calls of an output: the calls, and what is wrong with items that are not
    calls (``item 2 is not a tool call: ...``). ``ToolCallsError`` when the output is not
    JSON or its JSON holds no place for tool calls."""
    try:
        (value,) = read_documents(text, extract="auto", max_chars=max_chars, max_depth=max_depth)
    except JsonDocumentError as exc:
        raise ToolCallsError(exc.message, exc.line) from None
    return calls_in(value, max_depth)


def calls_in(value: Any, max_depth: int = MAX_DEPTH) -> tuple[list[ToolCall], list[str]]:
    """The tool calls of a decoded output (see ``read_tool_calls``)."""
    items = _items(value)
    calls: list[ToolCall] = []
    problems: list[str] = []
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            problems.append(f"item {number} is {described_type(item)}, not a tool call (an object)")
            continue
        kind = item.get("type")
        if isinstance(kind, str) and kind in _NOT_CALLS:
            continue
        function = item.get("function")
        if isinstance(function, dict):  # OpenAI chat: {"type": "function", "function": {...}}
            name, arguments = function.get("name"), function.get("arguments", _MISSING)
        elif "name" in item:  # Responses function_call, Anthropic tool_use, plain
            arguments = _MISSING
            for key in ("arguments", "input", "parameters"):
                if key in item:
                    arguments = item[key]
                    break
            name = item["name"]
        else:
            problems.append(f"item {number} is not a tool call: it names no tool (`name`)")
            continue
        decoded, problem = _arguments(arguments, max_depth)
        calls.append(ToolCall(len(calls), name, decoded, problem))
    return calls, problems


_MISSING = object()


def _items(value: Any) -> list[Any]:
    """The items of an output that may be tool calls: those of a whole response (its first
    choice's message, its ``output``, its ``content``), of a list, or the object itself."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict):
        raise ToolCallsError(
            f"the output is JSON {described_type(value)}, not a tool call: write an object "
            "with the tool's `name` and its `arguments`"
        )
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            value = message
    for key in ("tool_calls", "output", "content"):
        found = value.get(key)
        if isinstance(found, list):
            return found
        if key == "tool_calls" and key in value and found is None:
            return []  # an OpenAI message that calls no tool
    legacy = value.get("function_call")
    if isinstance(legacy, dict):  # OpenAI's older single function_call
        return [{"function": legacy}]
    return [value]


def _arguments(arguments: Any, max_depth: int) -> tuple[Any, str | None]:
    """The arguments as data: a JSON string decoded (empty: no arguments), an object as it
    is; else None and why."""
    if arguments is _MISSING or arguments is None:
        return {}, None
    if not isinstance(arguments, str):
        return arguments, None
    if not arguments.strip():
        return {}, None
    try:
        decoded = decode_bounded(arguments)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}: " if "\n" in arguments.strip() else ""
        where = where or f"character {exc.pos + 1}: "
        return None, f"the arguments are not JSON ({where}{exc.msg})"
    except RecursionError:
        return None, "the arguments are nested too deeply to read"
    except ValueError as exc:
        return None, f"the arguments cannot be read: {exc}"
    if depth_of(decoded, max_depth) > max_depth:
        return None, f"the arguments are nested deeper than {max_depth} levels"
    if isinstance(decoded, str) and decoded.lstrip().startswith("{"):
        return None, (
            "the arguments are a JSON string holding JSON (encoded twice): write the "
            "arguments object once"
        )
    return decoded, None


# ----------------------------------------------------------------------- SDK objects

_MAX_ITEMS = 1000
"""At most this many items of a response object are read (its tool calls, its blocks)."""


def tool_calls_text(value: Any) -> str | None:
    """The tool calls an SDK's response object carries, as the JSON text the ``tool_call``
    kind reads: a list of ``{"name", "arguments"}`` (arguments as given: a JSON string or
    an object). None when ``value`` is not such an object.

    Duck-typed on the attributes the SDKs give: an OpenAI chat completion (``choices``)
    or its message (``tool_calls``), an OpenAI Responses response (``output`` items of
    type ``function_call``), an Anthropic message (``content`` blocks of type
    ``tool_use``), or a list of such calls, items or blocks. A response without tool calls
    gives an empty list, so the contract says no tool was called."""
    items: Any = None
    if type(value) is dict:  # a plain response or call, as the kind reads it from text
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return None
    if isinstance(value, (list, tuple)):
        items = value
    else:
        choices = _attribute(value, "choices")
        if isinstance(choices, (list, tuple)) and choices:
            value = _attribute(choices[0], "message")
        for name in ("tool_calls", "output", "content"):
            found = _attribute(value, name)
            if isinstance(found, (list, tuple)):
                items = found
                break
            if name == "tool_calls" and found is None and _has(value, "tool_calls"):
                items = []
                break
    if items is None:
        return None
    calls: list[dict[str, Any]] = []
    for item in list(items[:_MAX_ITEMS]):
        call = _sdk_call(item)
        if call is None:
            continue
        calls.append(call)
    if not calls and items and not any(_is_response_item(item) for item in items[:_MAX_ITEMS]):
        return None  # a list of something else: not a response
    try:
        return json.dumps(calls, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def _sdk_call(item: Any) -> dict[str, Any] | None:
    """One call of an SDK object as plain data, or None for an item that is not a call."""
    if isinstance(item, dict):
        return item
    kind = _attribute(item, "type")
    if isinstance(kind, str) and kind in _NOT_CALLS:
        return None
    function = _attribute(item, "function")
    if function is not None:  # OpenAI chat
        return {
            "name": _attribute(function, "name"),
            "arguments": _attribute(function, "arguments"),
        }
    name = _attribute(item, "name")
    if name is None:
        return None
    arguments = _attribute(item, "arguments")
    if arguments is None:
        arguments = _attribute(item, "input")
    return {"name": name, "arguments": _plain(arguments)}


def _is_response_item(item: Any) -> bool:
    """Whether an item is a part of a response (has a ``type``), call or not."""
    return isinstance(_attribute(item, "type"), str)


def _plain(value: Any) -> Any:
    """Arguments as plain JSON data (an SDK gives a dict or a string already)."""
    if value is None or isinstance(value, (str, int, float, bool, dict, list)):
        return value
    dump = _attribute(value, "model_dump")
    if callable(dump):
        try:
            return dump()
        except Exception:
            return None
    return None


def _has(value: Any, name: str) -> bool:
    try:
        return hasattr(value, name)
    except Exception:
        return False


def _attribute(value: Any, name: str) -> Any:
    """``value.name`` (or ``value[name]`` for a dict), None when absent or when reading it
    raises: a caller's object may do anything."""
    try:
        if isinstance(value, dict):
            return value.get(name)
        return getattr(value, name, None)
    except Exception:
        return None


def nearest_name(name: str, names: list[str]) -> str | None:
    """The known name closest to ``name`` (difflib), or None when none is close."""
    # Deferred for start-up time: only a wrong name asks for a suggestion.
    import difflib

    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_tool(name: str, names: frozenset[str] | set[str]) -> bool:
    """Whether a call naming ``name`` calls no tool of ``names`` (a complete name: a
    streamed prefix decides this only once the name's string is closed)."""
    return name not in names
