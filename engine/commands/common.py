"""Options and helpers shared by commands."""

from __future__ import annotations

import click

from engine.errors import EngineError
from engine.pack import Pack, load_pack

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def parse_vars(pairs: tuple[str, ...]) -> dict[str, str]:
    """``KEY=VALUE`` pairs into a dict; anything else is a usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.UsageError(f"--var expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


class UsageFailure(click.ClickException):
    """A usage or pack problem: message on stderr, exit status 2."""

    exit_code = EXIT_USAGE

    def show(self, file: object = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def open_pack(ref: str) -> Pack:
    try:
        return load_pack(ref)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
