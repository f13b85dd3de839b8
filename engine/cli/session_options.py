"""The options of the commands that record in a session: `--session DIR`, `--item KEY` and
`--ledger URL`, and `--sessions-dir DIR` of those serving many sessions by name. Apart from
options.py, which `rules parse` imports and which records nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from engine.session.session_ref import DEFAULT_SESSION, item_name_problem

F = TypeVar("F", bound=Callable[..., Any])


def _item_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and (problem := item_name_problem(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def item_option(help: str) -> Callable[[F], F]:
    """`--item KEY`: names the item whose attempts a session counts, instead of the parts
    the pack's ``session.item`` declares (an empty KEY is a usage error)."""
    return click.option("--item", metavar="KEY", callback=_item_name, help=help)


def session_option(help: str, *, default: bool = True) -> Callable[[F], F]:
    """The `--session DIR` option: the session folder, `.rules-session` by default (or no
    default, for commands where a session is optional)."""
    return click.option(
        "--session",
        "session_dir",
        type=click.Path(file_okay=False),
        default=str(DEFAULT_SESSION) if default else None,
        show_default=default,
        help=help,
    )


def ledger_option(
    help: str = "The session's ledger: a path or sqlite:///path (SQLite), or "
    "postgresql://user@host:port/dbname (PostgreSQL; --session NAME is then a session "
    "name in it). Default: $RULES_LEDGER, else the session folder's ledger.sqlite3.",
) -> Callable[[F], F]:
    """`--ledger URL` (or ``RULES_LEDGER``; the option wins): where the session's ledger
    is. A path or sqlite:///path is a SQLite file; postgresql://user@host:port/dbname a
    PostgreSQL database, where `--session NAME` names a session (no folder is used).
    Default: the session folder's own ledger. A command serving many sessions says so in
    its ``help``."""
    return click.option(
        "--ledger",
        "ledger_url",
        envvar="RULES_LEDGER",
        default=None,
        metavar="URL",
        help=help,
    )


def sessions_dir_option(help: str) -> Callable[[F], F]:
    """`--sessions-dir DIR` of a command serving many sessions by name: the folder holding
    one folder per session."""
    return click.option(
        "--sessions-dir",
        default="sessions",
        show_default=True,
        type=click.Path(file_okay=False),
        help=help,
    )
