"""Helpers shared by commands: exit codes, --var pairs, output files, usage errors, the
pack and context a command opens, --locked (the options themselves: options.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from engine.core.errors import EngineError

if TYPE_CHECKING:
    from engine.pack.compiled import Pack

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


def open_pack(ref: str, *, cached: bool = False) -> Pack:
    """The pack ``ref`` names, loaded and checked; with ``cached``, from its image in the
    compiled-pack cache when that is current (the commands run once per output)."""
    try:
        if cached:
            # Deferred for start-up time: every command imports this module.
            from engine.pack.cache import open_pack as open_cached

            return open_cached(ref, locked=locked_setting())
        # Deferred for start-up time: every command imports this module; packs need pydantic.
        from engine.pack.loaded import load_pack

        return load_pack(ref, locked=locked_setting())
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def load_context(path: str | None) -> dict[str, Any]:
    """A --context file (YAML or JSON) as a mapping; errors name the file and place."""
    if path is None:
        return {}
    # Deferred for start-up time: every command imports this module (`rules --version`
    # imports no pathlib), and YAML only for a --context file.
    from pathlib import Path

    from engine.format.context import ContextFile
    from engine.format.yamldoc import read_yaml

    document = read_yaml(Path(path))
    if document.findings:
        first = document.findings[0]
        raise UsageFailure(f"{first.position}: {first.message}")
    if document.data is None:
        return {}
    if not isinstance(document.data, dict):
        raise UsageFailure(f"{path}:1:1: a context file must hold a mapping of keys")
    return ContextFile.of(document)  # errors about its keys name the file and line


def block_inputs(
    pack: Pack, block: str, context_file: str | None, var_pairs: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, Any]]:
    """The --context file and --var pairs split into ``block``'s params and its context
    (``Pack.split_inputs``: EngineError when they do not fit the pack)."""
    return pack.split_inputs(block, load_context(context_file), parse_vars(var_pairs))


def output_cap(option: int | None, pack_limit: int | None) -> int:
    """The largest output to read: the command's --max-output-bytes, else the pack's
    `limits.max_output_bytes`, else the engine's default."""
    # Deferred for start-up time: `rules --version` imports this module, and no text I/O.
    from engine.core.textio import MAX_OUTPUT_BYTES

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
