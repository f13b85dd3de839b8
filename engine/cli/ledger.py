"""`rules ledger`: commands on ledgers themselves (`copy`: sessions between ledgers)."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure
from engine.ledger import LedgerError, LedgerUrl, parse_url
from engine.ledger.store import LEDGER_FILE


@click.group("ledger", context_settings={"help_option_names": ["-h", "--help"]})
def ledger_group() -> None:
    """Work on ledgers themselves: copy sessions between SQLite and PostgreSQL.

    \b
    Examples:
      rules ledger copy --from .rules-session --to postgresql://rules@db:5432/rules
    """


@ledger_group.command("copy")
@click.option(
    "--from",
    "source",
    required=True,
    metavar="SOURCE",
    help="The ledger to copy from: a file, a session folder (its ledger.sqlite3), "
    "sqlite:///path or postgresql://user@host:port/dbname.",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="TARGET",
    help="The ledger to copy into, in the same forms (a SQLite ledger is created when absent).",
)
@click.option(
    "--session",
    "session",
    default=None,
    metavar="NAME",
    help="The session to copy [default: every session of SOURCE; a session folder's is named ''].",
)
@click.option("--as", "as_name", default=None, metavar="NAME", help="Name the copied session NAME.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace the session's rows in TARGET (else a session already there is refused).",
)
def copy_command(
    source: str, target: str, session: str | None, as_name: str | None, replace: bool
) -> None:
    """Copy sessions from one ledger to another, losslessly, in either direction.

    Every row of the session is copied (attempts and their warnings, kept outputs byte for
    byte, conflicts and resolutions, choices, gate results and the gate failure log, round
    counts and statuses, item counters, settings) with its ids, in one transaction on
    TARGET: an interrupted copy writes nothing. A session that already has rows in TARGET
    is refused unless --replace. Passwords in URLs are never shown.

    \b
    Examples:
      rules ledger copy --from .rules-session --to postgresql://rules@db:5432/rules --as nightly
      rules ledger copy --from postgresql://rules@db:5432/rules --session nightly --to back.db
      rules ledger copy --from a.db --to b.db --replace      # every session of a.db

    \b
    Exit status: 0 copied, 2 a ledger that cannot be read or reached, a session already
    in TARGET, or a session not in SOURCE.
    """
    # Deferred for start-up time: `rules --help` lists this group without opening ledgers.
    from engine.ledger.connection import open_ledger
    from engine.ledger.copy import copy_sessions

    try:
        source_url = _location(source, must_exist=True)
        target_url = _location(target, must_exist=False)
        with open_ledger(source_url) as from_ledger, open_ledger(target_url) as to_ledger:
            done = copy_sessions(from_ledger, to_ledger, session, as_name, replace)
    except LedgerError as exc:
        raise UsageFailure(str(exc)) from None
    if not done:
        click.echo(f"{source_url}: no session has rows there; nothing was copied")
    for copied in done:
        rows = ", ".join(f"{n} {table}" for table, n in copied.rows.items() if n)
        named = "" if copied.target == copied.session else f" as {copied.target!r}"
        click.echo(
            f"copied session {copied.session!r}{named} from {source_url} to {target_url}: {rows}"
        )
        for table, shift in copied.moved.items():
            click.echo(f"  ids of {table} were taken in the target: moved by +{shift}")


def _location(text: str, must_exist: bool) -> LedgerUrl:
    """The ledger ``text`` names; a session folder means its ledger file. A SQLite source
    that does not exist is an error (opening it would create an empty ledger)."""
    url = parse_url(text)
    if url.path is None:
        return url
    path = url.path / LEDGER_FILE if url.path.is_dir() else url.path
    if must_exist and not path.is_file():
        raise LedgerError(
            f"{path}: no ledger there; give a ledger file, a session folder holding "
            f"{LEDGER_FILE}, sqlite:///path or postgresql://user@host:port/dbname"
        )
    return parse_url(path)
