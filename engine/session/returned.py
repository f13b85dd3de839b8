"""What a Python model call returned, made the output of an attempt with the bounds `rules run`
puts on a model command's stdout.

A call may also return an SDK's response object (or a list or dict of tool calls): its tool
calls become the JSON text the ``tool_call`` contract kind reads
(engine.contracts.tool_calls), whatever the client.

A call's return value is the caller's object, not the engine's: it may be a ``str`` or
``bytes`` subclass whose methods raise or lie, and it may be far larger than the pack
allows. It is read here once, through the built-in types' own methods (no method of the
subclass runs), measured before it is copied, and refused whole when it is over the cap:
an output over the cap is an execution failure, as a command printing more than the cap is
in `rules run`; a value that cannot be read is one too.

A ``ModelReply`` or an SDK's response object (``engine.policy.calls.replies``) gives its
text, bounded the same way, and the usage it reports.
"""

from __future__ import annotations

import inspect
import math
import sys
from typing import Any

from engine.contracts.tool_calls import tool_calls_text
from engine.core.errors import UsageError
from engine.core.numbers import INT64_MAX
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.policy.calls.replies import NO_USAGE, NotAReply, Usage, read_reply
from engine.session.run import Execution

_CHUNK = 1 << 20
"""Characters encoded at a time when measuring a text's size in UTF-8."""


def returned_output(value: Any, cap: int = MAX_OUTPUT_BYTES) -> Execution:
    """``value`` as an attempt's output: plain text or bytes of at most ``cap`` bytes
    (UTF-8 for text), else an execution failure saying why. A UsageError for an awaitable
    (the caller used ``run`` for an async call)."""
    try:
        kind = type(value)
        if issubclass(kind, str):
            text = str.__getitem__(value, slice(None))  # a plain str; no method of kind runs
            if _utf8_size_over(text, cap):
                return Execution("", too_large(cap))
            return Execution(text, None)
        if issubclass(kind, (bytes, bytearray)):
            data = bytes(memoryview(value))
            if len(data) > cap:
                return Execution("", too_large(cap, text=False))
            return Execution(data, None)
        awaitable = inspect.isawaitable(value)
        # A response that calls tools is its calls (the tool_call kind reads them), with
        # the usage it reports; one without calls is its text, when it has text.
        called = None if awaitable else _called_tools(value)
        reply = None if awaitable else _reply_or_none(value, called is not None)
    except NotAReply as exc:
        if (calls := tool_calls_text(value)) is not None:  # no text and no calls: "[]"
            return Execution(calls, None)
        return Execution("", f"model call returned a {_name(value)} without text: {exc}")
    except Exception as exc:  # a hostile return value: the call failed to give an output
        return Execution(
            "", f"model call returned a {_name(value)} that cannot be read: {_raised(exc)}"
        )
    if called is not None:
        usage = reply[1] if reply is not None else NO_USAGE
        if _utf8_size_over(called, cap):
            return Execution("", too_large(cap), usage=usage)
        return Execution(called, None, usage=usage)
    if reply is not None:
        text, usage = reply
        if _utf8_size_over(text, cap):
            return Execution("", too_large(cap), usage=usage)
        return Execution(text, None, usage=usage)
    if awaitable:
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "never awaited" warning
        raise UsageError(
            "engine.run: call= returned an awaitable: use `await engine.arun(...)` for an "
            "async call"
        )
    try:
        calls = tool_calls_text(value)  # an SDK's response carrying tool calls, duck-typed
    except Exception as exc:
        return Execution(
            "", f"model call returned a {_name(value)} that cannot be read: {_raised(exc)}"
        )
    if calls is not None:
        return (
            Execution("", too_large(cap)) if _utf8_size_over(calls, cap) else Execution(calls, None)
        )
    return Execution("", f"model call returned {_name(value)}, not the output text")


def _called_tools(value: Any) -> str | None:
    """The tool calls a response object (not a plain dict or list) carries, as JSON text;
    None when it calls no tool."""
    if isinstance(value, (dict, list, tuple)):
        return None  # read below as the tool_call kind reads text
    calls = tool_calls_text(value)
    return None if calls is None or calls == "[]" else calls


def _reply_or_none(value: Any, calling: bool) -> tuple[str, Usage] | None:
    """``read_reply``; a response that calls tools may have no text (its usage is read
    when it does)."""
    try:
        return read_reply(value)
    except NotAReply:
        if calling:
            return None
        raise


def too_large(cap: int, text: bool = True) -> str:
    """The error of an attempt whose call returned more than ``cap`` bytes."""
    return f"model call returned more than {cap} bytes" + (" (UTF-8)" if text else "")


def _utf8_size_over(text: str, cap: int) -> bool:
    """Whether ``text`` is over ``cap`` bytes in UTF-8, found without encoding more than
    needed: every character is 1 to 4 bytes."""
    if len(text) > cap:
        return True
    if len(text) * 4 <= cap:
        return False
    size = 0
    for start in range(0, len(text), _CHUNK):
        size += len(text[start : start + _CHUNK].encode("utf-8", "surrogatepass"))
        if size > cap:
            return True
    return False


def _raised(exc: Exception) -> str:
    """An exception met reading a return value: its type's name (its message is the
    caller's object's too, and may raise in turn)."""
    return f"{_name(exc)} raised"


def _name(value: Any) -> str:
    """The name of ``value``'s type, read from the type itself."""
    try:
        return str(type.__getattribute__(type(value), "__name__"))
    except Exception:
        return "object"


def option_cap(name: str, value: Any, pack_limit: int | None) -> int:
    """The largest output a call may return: ``max_output_bytes=``, else the pack's
    ``limits.max_output_bytes``, else the engine's default (as `rules run`)."""
    if value is None:
        return pack_limit or MAX_OUTPUT_BYTES
    if type(value) is not int or not 1 <= value <= INT64_MAX:
        raise UsageError(
            f"{name}: max_output_bytes= takes a whole number of bytes from 1 to {INT64_MAX} "
            f"(as `rules run --max-output-bytes`), not {_shown(value)}"
        )
    return value


def option_seconds(name: str, value: Any, default: float | None) -> float | None:
    """``timeout=`` as a float: a real number of seconds above 0 that a float can hold
    (10**400 is refused, not an OverflowError), else ``default``."""
    if value is None:
        return default
    seconds = math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except Exception:  # an int too large for a float (OverflowError), or a hostile one
            seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(
            f"{name}: timeout= takes a number of seconds above 0 that a float holds "
            f"(at most {sys.float_info.max:g}), not {_shown(value)}"
        )
    return seconds


def _shown(value: Any) -> str:
    """A caller's value in a message, short whatever its size (a 400-digit int)."""
    if type(value) is int and value.bit_length() > 64:  # str() refuses over 4300 digits
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits"
    if type(value) in (int, float, bool, type(None)):
        return repr(value)
    return f"a {_name(value)}"
