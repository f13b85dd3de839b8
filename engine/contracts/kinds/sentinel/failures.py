"""Failures of a sentinel parse: built only when a check fails, never on the happy path."""

from __future__ import annotations

from collections.abc import Mapping

from engine.core.placeholders import fill
from engine.core.results import Failure


class Reject(Exception):
    """Stops a parse at its first failing check, carrying the failure."""

    def __init__(self, failure: Failure, unprefixed: str | None = None) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.unprefixed = unprefixed  # the message before its line prefix, to renumber it


class Reporter:
    """Turns a message id (or a finished message) into a ``Reject`` of the right type."""

    __slots__ = ("block", "failure_types", "messages")

    def __init__(
        self, block: str, messages: Mapping[str, str], failure_types: Mapping[str, str]
    ) -> None:
        self.block = block
        self.messages = messages
        self.failure_types = failure_types  # kind ("parse", "nonce", "input") -> failure type

    def fail(
        self, code: str, line: int | None = None, kind: str = "parse", **values: object
    ) -> Reject:
        """The catalogue message ``code`` filled with ``values`` (and the block name)."""
        return self.fail_with(code, values, line, kind)

    def fail_with(
        self, code: str, values: Mapping[str, object], line: int | None = None, kind: str = "parse"
    ) -> Reject:
        message = fill(self.messages[code], {"block": self.block, **values})
        return self.reject(message, line, kind)

    def reject(self, message: str, line: int | None = None, kind: str = "parse") -> Reject:
        """A finished message, with the line prefix when ``line`` is given."""
        if line is None:
            return Reject(Failure(self.failure_types[kind], message, line))
        prefixed = fill(self.messages["line_prefix"], {"line": line, "message": message})
        return Reject(Failure(self.failure_types[kind], prefixed, line), message)

    def shifted(self, rejected: Reject, lines: int) -> Reject:
        """``rejected`` with its line number moved down by ``lines``: a payload line counted
        from the block's body becomes the output's own line."""
        failure = rejected.failure
        if failure.line is None or rejected.unprefixed is None or not lines:
            return rejected
        line = failure.line + lines
        message = fill(self.messages["line_prefix"], {"line": line, "message": rejected.unprefixed})
        return Reject(Failure(failure.type, message, line), rejected.unprefixed)
