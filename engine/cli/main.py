"""The command line: thin click commands over the Python API.

Exit status: 0 clean, 1 findings (or an action is needed), 2 usage, pack or internal error.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from typing import Any, NoReturn

import click

from engine.cli.common import (
    EXIT_USAGE,
    remember_locked,
)
from engine.core.errors import EngineError
from engine.core.plugins import foreign_exit
from engine.core.redaction import guard_streams
from engine.core.registry import plugin_of
from engine.core.telemetry import configure_from_environment
from engine.core.version import VERSION

# Commands defined in their own modules, imported only when invoked: `rules --version` and
# `rules parse` do not pay for the imports of the others.
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "backtest": ("engine.cli.backtest", "backtest_command"),
    "budgets": ("engine.cli.budgets", "budgets_command"),
    "check": ("engine.cli.check", "check_command"),
    "choose": ("engine.cli.choose", "choose_command"),
    "conflicts": ("engine.cli.conflicts", "conflicts_command"),
    "eval": ("engine.cli.evaluate", "eval_command"),
    "explain": ("engine.cli.explain", "explain_command"),
    "export": ("engine.cli.export", "export_command"),
    "gate": ("engine.cli.gate", "gate_command"),
    "init": ("engine.cli.init", "init_command"),
    "ledger": ("engine.cli.ledger", "ledger_group"),
    "lock": ("engine.cli.lock", "lock_command"),
    "log": ("engine.cli.log", "log_command"),
    "mcp": ("engine.cli.mcp", "mcp_command"),
    "packs": ("engine.cli.packs", "packs_command"),
    "parse": ("engine.cli.parse", "parse_command"),
    "prompt": ("engine.cli.prompt", "prompt_command"),
    "render": ("engine.cli.evaluate", "render_command"),
    "report": ("engine.cli.report", "report_command"),
    "review": ("engine.cli.review", "review_group"),
    "run": ("engine.cli.run", "run_command"),
    "schema": ("engine.cli.schema", "schema_command"),
    "serve": ("engine.cli.serve", "serve_command"),
    "test": ("engine.cli.packtest", "test_command"),
}


class LazyGroup(click.Group):
    """A group whose commands in ``LAZY_COMMANDS`` are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module_name, attribute = LAZY_COMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module_name), attribute)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(VERSION, prog_name="rules")
@click.option(
    "--locked/--no-locked",
    default=None,
    help="Every git pack reference must have an entry in rules.lock [default: locked when "
    "CI=true].",
)
@click.pass_context
def cli(ctx: click.Context, locked: bool | None) -> None:
    """Declarative rules for LLM outputs: check packs, parse, evaluate, decide, render.

    \b
    Examples:
      rules check                      # check every pack under ./rules/
      rules check builtin:core         # check a pack shipped with the engine
      rules init my-pack && rules test my-pack
      rules --locked check rules/      # git packs only at their locked commits
      rules schema > rulepack.schema.json

    A `[tool.rules]` table in pyproject.toml gives defaults to every command (packs,
    session, ledger, format); the command line wins.
    """
    remember_locked(locked)
    name = ctx.invoked_subcommand
    command = cli.get_command(ctx, name) if name else None
    if name and command is not None:
        ctx.default_map = {name: _project_defaults(name, command)}


def _allow_long_integers() -> None:
    """Block data may hold integers of any length; JSON output must not refuse them."""
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)


def main() -> None:
    """Entry point of the `rules` script."""
    _allow_long_integers()
    flush_spans = configure_from_environment()  # reads the environment only, unless asked
    try:
        _run(cli, "rules")
    finally:
        flush_spans()


def _undecodable_argument(argv: list[str]) -> str | None:
    """The first argument that is not UTF-8 text (its bytes were escaped as surrogates by
    Python) and names no existing file, up to a ``--`` (a model command's own arguments
    are passed on as they are); None when there is none."""
    for argument in argv:
        if argument == "--":
            return None
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            if not os.path.exists(argument):
                return argument
    return None


def _run(command: click.Command, prog_name: str, **extra: Any) -> None:
    """Run a script's command: what it does not turn into a message itself (a refused read
    or write, an internal error) is said on stderr with exit status 2."""
    if (undecodable := _undecodable_argument(sys.argv[1:])) is not None:
        shown = os.fsencode(undecodable).decode("utf-8", "backslashreplace")
        click.echo(
            f"error: the argument '{shown}' is not UTF-8 text; rules reads its arguments as "
            "UTF-8 (a file's name may be any bytes when the file exists)",
            err=True,
        )
        sys.exit(EXIT_USAGE)
    guard_streams()  # no secret a command read (a ledger password, a token) is ever printed
    try:
        if prog_name == "rules-check":
            # `rules` reads the table in its group instead
            extra["default_map"] = _project_defaults("check", command)
        command(prog_name=prog_name, **extra)
    except click.ClickException as exc:  # the project's settings, read before the command
        exc.show()
        sys.exit(exc.exit_code)
    except SystemExit as exc:
        _exit_of_foreign_code(exc)
        raise
    except OSError as exc:  # what the commands do not name themselves: mostly the output
        if os.environ.get("RULES_DEBUG"):
            raise
        _os_error(exc)
    except EngineError as exc:  # a known error no command named: said as one, not internal
        if os.environ.get("RULES_DEBUG"):
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as exc:
        if os.environ.get("RULES_DEBUG"):
            raise
        _raised_by_plugin(exc)
        click.echo(
            f"internal error: {_said(exc)} (set RULES_DEBUG=1 for a traceback)",
            err=True,
        )
        sys.exit(EXIT_USAGE)


def _said(exc: BaseException) -> str:
    """``Type: message`` of an exception, read so that neither may raise (a plugin's
    exception type may raise on its own name, its ``__str__`` may raise)."""
    try:
        name = str(type.__getattribute__(type(exc), "__name__"))
    except Exception:
        name = "exception"
    try:
        message = str(exc)
    except Exception:
        message = "(its message cannot be read)"
    return f"{name}: {message}"


def _raised_by_plugin(exc: Exception) -> None:
    """An exception raised in a plugin's code while the command ran (a kind's check that
    raises): an error naming the plugin and where, exit 2, not an internal error."""
    where = foreign_exit(exc)
    plugin = plugin_of(where.split(" ")[0]) if where else None
    if where is None or plugin is None:
        return
    click.echo(
        f"error: {plugin}: {where} raised {_said(exc)} while the command ran",
        err=True,
    )
    sys.exit(EXIT_USAGE)


def _exit_of_foreign_code(exc: SystemExit) -> None:
    """A ``SystemExit`` raised by code that is neither the engine's nor its libraries' (a
    plugin's check or evaluation calling ``sys.exit``) would make the command's outcome a
    lie (`rules check` exiting 0 with no output): it is an error naming that code, exit 2."""
    where = foreign_exit(exc)
    if where is None:
        return
    plugin = plugin_of(where.split(" ")[0])
    named = f"{plugin}: {where}" if plugin else where
    click.echo(
        f"error: {named} called sys.exit({exc.code!r}) while the command ran; a plugin may "
        "not end a command (raise an exception instead), and its outcome is unknown",
        err=True,
    )
    sys.exit(EXIT_USAGE)


def _os_error(exc: OSError) -> NoReturn:
    """A read or write the system refused (a full disk, an output that went away): named,
    exit 2, and nothing more written to an output that failed."""
    where = f"{exc.filename}: " if exc.filename else ""
    with contextlib.suppress(OSError, ValueError):
        click.echo(
            f"error: {where}cannot read or write ({exc.strerror or exc}); the output may be "
            "incomplete",
            err=True,
        )
    with contextlib.suppress(OSError, ValueError):  # the interpreter's last flush would fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(EXIT_USAGE)


def check_main() -> None:
    """Entry point of the `rules-check` script (the same as `rules check`)."""
    check = cli.get_command(click.Context(cli), "check")
    assert check is not None
    _run(check, "rules-check")


def _project_defaults(name: str, command: click.Command) -> dict[str, Any]:
    """The defaults the project's `[tool.rules]` table gives command ``name``."""
    # Deferred: reading pyproject.toml is 10 ms of imports (tomllib and its reader) that
    # `rules --version` does not need (python -X importtime).
    from engine.cli.project import default_map, project_settings

    return default_map(name, command, project_settings())
