"""Exception types and source positions.

Every error a user can cause carries where it happened (file, line, column) and what to do.
One root type, ``EngineError``; the CLI turns any of them into a message and exit status 2.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


class Position(NamedTuple):
    """A 1-based place in a source file (a tuple: it sorts by file, line, column)."""

    file: str
    line: int = 1
    column: int = 1

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


Locate = Callable[[tuple[str | int, ...]], Position]
"""The position of a key path of a pack (``SourceMap.locate``)."""


class EngineError(Exception):
    """Root of every error the engine raises on purpose."""

    def __init__(self, message: str, position: Position | None = None, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.position = position
        self.hint = hint

    def __str__(self) -> str:
        where = f"{self.position}: " if self.position else ""
        fix = f" ({self.hint})" if self.hint else ""
        return f"{where}{self.message}{fix}"


class PackError(EngineError):
    """A rulepack cannot be loaded or fails its checks."""

    def __init__(self, message: str, findings: tuple[object, ...] = ()) -> None:
        super().__init__(message)
        self.findings = findings


class UsageError(EngineError):
    """A caller of the Python API passed something the engine cannot use; the message says
    what to pass instead."""


class ParamError(UsageError):
    """A block parameter the caller gave does not match the pattern the pack declares for
    it: the caller's mistake, never the model's. ``field`` names it as a request does
    (``vars.NAME``)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class LedgerError(EngineError):
    """A ledger cannot be used: a location that is no ledger URL, a server that cannot be
    reached, a schema newer than this engine's, a write that failed twice. Its message names
    the ledger by its redacted URL only (``engine.ledger.url.redacted``). Defined here, below
    every layer, so a front door can tell it from other refusals without importing the
    ledger."""


class LedgerTimeout(LedgerError):
    """A write whose caller's deadline (``engine.core.deadline``: a server request's time
    limit) passed before it committed: it was rolled back, nothing of it was written."""


class ContextError(EngineError):
    """The context given to an evaluation does not fit what the pack declares."""


class EvaluationError(EngineError):
    """An evaluation could not be carried out (never raised for a bad model output)."""


class ConditionError(EvaluationError):
    """A pack's condition (a guard, a gate rule, a ``where``, a conflict option) raised
    while it ran: ``1/0``, a comparison of text with a number, a bound of the sandbox."""

    def __init__(self, expression: str, reason: str, position: Position | None = None) -> None:
        super().__init__(
            f"condition {expression!r} failed: {reason}",
            position,
            "fix the expression, or test what it reads first, e.g. `x is number and x < 50`",
        )
        self.expression = expression
        self.reason = reason


class RenderError(EngineError):
    """A prompt could not be rendered."""


def unknown_block_error(pack: str, block: str, known: list[str]) -> EngineError:
    """A block name the pack does not declare, with the ones it does."""
    names = ", ".join(known) or "none"
    return EngineError(f"pack {pack!r} has no block {block!r} (blocks: {names})")


def no_parser_error(block: str, kind: str) -> EngineError:
    """`parse` asked of a contract kind that has no deterministic parser."""
    return EngineError(
        f"block {block!r} is a {kind} contract; `parse` needs a sentinel contract (use `evaluate`)"
    )


@contextlib.contextmanager
def plugin_errors(what: str, point: EntryPoint) -> Iterator[None]:
    """Any error within the block, which registers the entry point ``point`` of an
    installed distribution (a ``what``: contract kind, rulepack section), is an EngineError
    naming it: a broken plugin is named, not a traceback. A ``SystemExit`` is one too (a
    plugin must not end the command); a Ctrl-C is the user's and passes."""
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        reason = f"it called sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else exc
        raise EngineError(
            f"the {what} {point.name!r} ({point.value}) cannot be loaded: {reason}"
        ) from exc
