"""What the first part of a streamed JSON output already decides.

Only for a contract whose JSON is the whole output (``extract: whole``): under ``auto`` a
fenced block later in the output would be the document instead, and under ``first`` any
later object could be; nothing there is definite before the end.

The top-level object (or array) is read member by member as it arrives, each member once
(a member still arriving is tried again when the text has doubled since): a syntax error
that no text can mend (one before the last few characters, not an open string) and a
top-level key the schema forbids (``additionalProperties: false`` without patterns) are
definite. Values are read by the standard library's C scanner, their numbers left as text.
"""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable
from typing import Any

from engine.contracts.json_documents import JsonDocumentError, decode_error
from engine.core.results import Failure

scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
"""The standard library's string scanner (C): a key read from where its quote ends."""

_SPACE = " \t\r\n"
_TAIL = 10
"""An error this close to the end may be the text being cut mid-token (``-Infinit``,
``1.5e+``, ``tru``): it is not definite."""


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _SPACE:
        index += 1
    return index


class _Wait(Exception):
    """The text ends before what is being read: wait for more."""


class JsonPrefix:
    """One streamed output of a JSON contract, read as it arrives."""

    def __init__(
        self, parse_failure: str, schema_failure: str, allowed: frozenset[str] | None
    ) -> None:
        self._parse_failure = parse_failure
        self._schema_failure = schema_failure
        self._allowed = allowed  # the top-level keys the schema allows; None: any
        self._decoder = json.JSONDecoder(parse_int=str, parse_float=str, parse_constant=str)
        self._start = -1  # the index of the top-level { or [ (-1: not found yet)
        self._next = 0  # where the next member starts (after its comma)
        self._members = 0
        self._retry = 0  # the text's length from which a member still arriving is read again
        self._done = False

    def feed(self, text: str) -> Failure | None:
        if self._done or len(text) < self._retry:
            return None
        if self._start < 0:
            first = _skip(text, 1 if text.startswith("\ufeff") else 0)
            if first >= len(text):
                return None
            if text[first] not in "{[":
                self._done = True  # a scalar, or not JSON at all: the whole output says
                return None
            self._start = self._next = first + 1
        try:
            while not self._done:
                self._member(text)
        except _Wait:
            return None
        except JsonDocumentError as exc:
            self._done = True
            return Failure(self._parse_failure, exc.message, exc.line)
        except _Forbidden as exc:
            self._done = True
            return Failure(self._schema_failure, str(exc), path="")
        return None

    def _member(self, text: str) -> None:
        """Read the next member (or element) whole, or raise what stops it."""
        obj = text[self._start - 1] == "{"
        index = _skip(text, self._next)
        if index >= len(text):
            raise _Wait
        if text[index] == ("}" if obj else "]") and self._members == 0:
            self._done = True  # empty: the whole output decides the rest
            return
        if obj:
            if text[index] != '"':
                self._syntax(text, "Expecting property name enclosed in double quotes", index)
            try:
                key, index = scanstring(text, index + 1)
            except json.JSONDecodeError:
                raise _Wait from None  # the key is still arriving, or broken: the end says
            if self._allowed is not None and key not in self._allowed:
                raise _Forbidden(
                    f"the document has keys the contract does not allow: remove `{key}`"
                )
            index = _skip(text, index)
            if index >= len(text):
                raise _Wait
            if text[index] != ":":
                self._syntax(text, "Expecting ':' delimiter", index)
            index = _skip(text, index + 1)
            if index >= len(text):
                raise _Wait
        try:
            _, end = self._decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            if exc.msg.startswith("Unterminated string") or exc.pos >= len(text) - _TAIL:
                self._retry = 2 * len(text) - index  # the member twice its size by then
                raise _Wait from None
            raise decode_error(exc, text) from None
        except RecursionError:
            self._done = True  # nested too deeply: the whole output's reading says so
            raise _Wait from None
        after = _skip(text, end)
        if after >= len(text) - _TAIL:
            raise _Wait  # a number may go on, or a comma is still to come
        if text[after] == ",":
            self._next = after + 1
            self._members += 1
            return
        if text[after] != ("}" if obj else "]"):
            self._syntax(text, "Expecting ',' delimiter", after)
        self._done = True  # the document is whole: the evaluation reads the rest

    def _syntax(self, text: str, message: str, index: int) -> None:
        """A syntax error at ``index``: definite unless it is at the text's last characters."""
        if index >= len(text) - _TAIL:
            raise _Wait
        raise decode_error(json.JSONDecodeError(message, text, index), text)


class _Forbidden(Exception):
    """A top-level key the schema does not allow."""


def allowed_keys(schema: Any) -> frozenset[str] | None:
    """The only keys a top-level object may have under ``schema``, when it says so plainly
    (``additionalProperties: false``, no ``patternProperties``, no references or
    combinations that could allow more); None otherwise."""
    if not isinstance(schema, dict) or schema.get("additionalProperties") is not False:
        return None
    if any(key in schema for key in ("patternProperties", "$ref", "allOf", "anyOf", "oneOf")):
        return None
    properties = schema.get("properties") or {}
    return frozenset(properties) if isinstance(properties, dict) else None
