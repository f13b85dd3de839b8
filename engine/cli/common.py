"""Helpers shared by commands: exit codes, --var pairs, output files, usage errors,
--locked, the output cap (the options themselves: options.py; the pack and context a
command opens: opening.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click

from engine.core.registry import broken_plugins
from engine.core.textio import MAX_OUTPUT_BYTES

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def parse_vars(pairs: tuple[str, ...], option: str = "--var") -> dict[str, str]:
    """``KEY=VALUE`` pairs into a dict; anything else is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.UsageError(f"{option} expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


class OutputFile(click.File):
    """A file to write (``-o``), checked before the command works: a path in a folder that
    does not exist, a folder, or a place that cannot be written is a usage error (exit 2),
    not click's exit 1, which these commands give for findings. The file is still opened
    only when the output is written, so a run that fails leaves an existing file as it was."""

    def __init__(self) -> None:
        super().__init__("w", encoding="utf-8")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value != "-":
            folder = os.path.dirname(value) or "."
            if os.path.isdir(value):
                self.fail(f"{value!r} is a folder; name a file in it", param, ctx)
            if not os.path.isdir(folder):
                self.fail(f"{value!r}: the folder {folder!r} does not exist", param, ctx)
            target = value if os.path.exists(value) else folder
            if not os.access(target, os.W_OK):
                self.fail(f"{value!r}: cannot be written (permission denied)", param, ctx)
        return super().convert(value, param, ctx)


class UsageFailure(click.ClickException):
    """A usage or pack problem: message on stderr, exit status 2."""

    exit_code = EXIT_USAGE

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def refuse_broken_plugins() -> None:
    """What shows every plugin (the format's schema, the rule catalogue) is not shown
    without one that could not be loaded: exit 2 naming each."""
    if broken := broken_plugins():
        raise UsageFailure("; ".join(broken.values()))


def refuse_terminal_stdin(command: str) -> None:
    """A usage error when an output would be read from stdin and stdin is a terminal: a
    command waiting silently for typed input looks hung."""
    try:
        terminal = os.isatty(sys.stdin.fileno())
    except (AttributeError, ValueError, OSError):  # no file descriptor (a test runner's)
        terminal = False
    if terminal:
        raise UsageFailure(
            "no output to read: stdin is a terminal; pass a FILE, or pipe the output in "
            f"(model-cli < prompt.txt | rules {command} ...)"
        )


LOCKED_KEY = "engine.locked"
"""Where `rules --locked/--no-locked` keeps its choice for the command it runs: the click
context's meta, which lives as long as that one invocation."""


def remember_locked(locked: bool | None) -> None:
    """Keep `--locked/--no-locked` (None: not given) for the commands of this invocation."""
    if locked is not None:
        click.get_current_context().meta[LOCKED_KEY] = locked


def locked_setting() -> bool | None:
    """`--locked/--no-locked` of this invocation, or None (the engine's default: CI=true)."""
    context = click.get_current_context(silent=True)
    return None if context is None else context.meta.get(LOCKED_KEY)


def output_cap(option: int | None, pack_limit: int | None) -> int:
    """The largest output to read: the command's --max-output-bytes, else the pack's
    `limits.max_output_bytes`, else the engine's default."""
    return option or pack_limit or MAX_OUTPUT_BYTES


OUTPUT_CAP_HELP = "[default: the pack's `limits.max_output_bytes`, else 67108864]"


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM (a `kill`, a cancelled CI job) ends the process as an exit
    does (status 143), so clean-up runs: a backtest's local workers are told to stop (left
    behind by a killed parent, they would wait for work forever), a local Dask cluster is
    closed, a model command's process group is ended."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def stop(number: int, frame: object) -> None:
        raise SystemExit(128 + number)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
