"""The options commands share, declared once: a command lists the ones it takes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from engine.cli.common import OutputFile
from engine.cli.types import BoundedInt
from engine.report import formats

F = TypeVar("F", bound=Callable[..., Any])

PACK_HELP = "Pack: builtin name, folder or file."


def format_option(
    result_type: str, default: str | None = "text", help: str | None = None, **extra: Any
) -> Callable[[F], F]:
    """`--format`: its choices are the formats the report layer has for ``result_type``."""
    return click.option(
        "--format",
        "output_format",
        type=click.Choice(formats(result_type)),
        default=default,
        help=help,
        **extra,
    )


def pack_option(
    help: str = PACK_HELP, required: bool = True, multiple: bool = False
) -> Callable[[F], F]:
    """`--pack REF`: a builtin name, a pack folder or a pack file (``pack_ref``; with
    ``multiple``, repeatable: ``pack_refs``)."""
    return click.option(
        "--pack",
        "pack_refs" if multiple else "pack_ref",
        required=required,
        multiple=multiple,
        help=help,
    )


def block_option(
    help: str = "Block (contract) name of the pack.", required: bool = True
) -> Callable[[F], F]:
    return click.option("--block", required=required, help=help)


def var_option(help: str | None = None) -> Callable[[F], F]:
    """`--var KEY=VALUE`, repeatable (read with ``common.parse_vars``)."""
    return click.option("--var", "var_pairs", multiple=True, metavar="KEY=VALUE", help=help)


def context_option(help: str | None = None) -> Callable[[F], F]:
    """`--context FILE`: a YAML or JSON mapping (read with ``common.load_context``)."""
    return click.option(
        "--context", "context_file", type=click.Path(dir_okay=False), default=None, help=help
    )


def nonce_option(help: str) -> Callable[[F], F]:
    return click.option("--nonce", help=help)


def now_option(help: str) -> Callable[[F], F]:
    return click.option("--now", default=None, metavar="ISO8601", help=help)


def output_option(help: str = "File to write (default: stdout).") -> Callable[[F], F]:
    """`-o/--output FILE` (stdout by default), checked before the command works."""
    return click.option("-o", "--output", "output", type=OutputFile(), default="-", help=help)


def max_output_bytes_option(help: str, default: int | None = None) -> Callable[[F], F]:
    """`--max-output-bytes N`: the largest output (or record line) to read."""
    return click.option(
        "--max-output-bytes",
        type=BoundedInt(min=1),
        default=default,
        show_default=default is not None,
        help=help,
    )


def workers_option(help: str, most: int | None = None) -> Callable[[F], F]:
    """`--workers N`: how many worker processes (1 by default, at most ``most``)."""
    return click.option(
        "--workers", type=BoundedInt(min=1, max=most), default=1, show_default=True, help=help
    )
