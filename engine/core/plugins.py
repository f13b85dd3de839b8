"""Loading the entry points of installed distributions, so that no plugin can lie about
a command's outcome or hang it.

A plugin's module runs arbitrary code when it is imported. It may raise, call
``sys.exit(0)`` (which would end `rules check` with status 0 and no output), or never
finish. Each entry point is therefore loaded in a thread of its own and waited for at most
``timeout()`` seconds (``RULES_PLUGIN_TIMEOUT``, default ``PLUGIN_TIMEOUT_S``); whatever it
raises there, ``SystemExit`` and ``KeyboardInterrupt`` included (no signal reaches that
thread: such an exception is the plugin's own), is a ``PluginError`` naming the entry
point. A Ctrl-C of the user still reaches the main thread and stops the command as usual.

A plugin that fails is set aside, not fatal: the registry remembers why
(``engine.core.registry.broken_plugins``), a pack that uses it gets a finding naming the
entry point, and a pack that does not use it loads as if it were not installed.

``foreign_exit`` names the code that raised a ``SystemExit`` that neither the engine nor
its command-line and server libraries raised: a plugin's check or evaluation calling
``sys.exit`` while a command runs, which the `rules` command turns into an error.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from engine.core.errors import EngineError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

PLUGIN_TIMEOUT_S = 30.0
"""Seconds an entry point may take to load (import its module, read its object)."""

TIMEOUT_ENV = "RULES_PLUGIN_TIMEOUT"

# The packages whose own SystemExit is the command's outcome (click ends every command so).
_OWN_EXITS = ("engine", "click", "uvicorn")


class PluginError(EngineError):
    """An entry point that could not be loaded or registered; the message names it."""


def timeout() -> float:
    """The seconds an entry point may take to load (``RULES_PLUGIN_TIMEOUT``)."""
    try:
        given = float(os.environ.get(TIMEOUT_ENV, PLUGIN_TIMEOUT_S))
    except ValueError:
        return PLUGIN_TIMEOUT_S
    return given if 0 < given < float("inf") else PLUGIN_TIMEOUT_S


def describe(what: str, point: EntryPoint) -> str:
    """``the contract kind 'lines' (my_rules.lines:KIND)``."""
    return f"the {what} {point.name!r} ({point.value})"


def why(exc: BaseException) -> str:
    """What a plugin's exception says, for a message."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    if isinstance(exc, KeyboardInterrupt):
        return "it raised KeyboardInterrupt"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if not text or not isinstance(exc, EngineError) else text


def load_entry_point(point: EntryPoint, what: str, seconds: float | None = None) -> Any:
    """The object ``point`` names, loaded in a thread of its own within ``seconds``; a
    ``PluginError`` naming it when loading raises anything or takes longer."""
    limit = timeout() if seconds is None else seconds
    outcome: dict[str, Any] = {}

    def load() -> None:
        try:
            outcome["plugin"] = point.load()
        except BaseException as exc:  # the plugin's own: no signal is delivered here
            outcome["error"] = exc

    loader = threading.Thread(target=load, name=f"rules-plugin-{point.name}", daemon=True)
    loader.start()
    loader.join(limit)
    if loader.is_alive():
        raise PluginError(
            f"{describe(what, point)} cannot be loaded: it did not load within {limit:g} s "
            f"(set {TIMEOUT_ENV} to wait longer)"
        )
    if "error" in outcome:
        error: BaseException = outcome["error"]
        raise PluginError(f"{describe(what, point)} cannot be loaded: {why(error)}") from error
    return outcome["plugin"]


def load_entry_points(group: str, what: str) -> Iterator[tuple[EntryPoint, Any | PluginError]]:
    """Each entry point of ``group`` with the object it names, or the ``PluginError`` that
    says why it could not be loaded (the others are still loaded)."""
    # Deferred for start-up time: only a registry asked for a name it does not know reads these.
    from importlib.metadata import entry_points

    for point in entry_points(group=group):
        try:
            yield point, load_entry_point(point, what)
        except PluginError as exc:
            yield point, exc


def foreign_exit(exc: BaseException) -> str | None:
    """Where a ``SystemExit`` (or another exception) was raised when it was not by the
    engine or the libraries it runs on (``module (file:line)``), else None."""
    tb: TracebackType | None = exc.__traceback__
    last = None
    while tb is not None:
        last = tb
        tb = tb.tb_next
    if last is None:
        return None
    frame = last.tb_frame
    module = str(frame.f_globals.get("__name__", "?"))
    if module.split(".")[0] in _OWN_EXITS:
        return None
    return f"{module} ({frame.f_code.co_filename}:{last.tb_lineno})"
