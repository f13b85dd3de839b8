"""`rules ledger`: commands on ledgers themselves (`copy`: sessions between ledgers)."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure
from engine.core.errors import LedgerError
from engine.session.ledger_copy import CopyRequest, copy_ledger


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

    try:
        report = copy_ledger(CopyRequest(source, target, session, as_name, replace))
    except LedgerError as exc:
        raise UsageFailure(str(exc)) from None
    if not report.copied:
        click.echo(f"{report.source}: no session has rows there; nothing was copied")
    for copied in report.copied:
        rows = ", ".join(f"{n} {table}" for table, n in copied.rows.items() if n)
        named = "" if copied.target == copied.session else f" as {copied.target!r}"
        click.echo(
            f"copied session {copied.session!r}{named} from {report.source} to "
            f"{report.target}: {rows}"
        )
        for table, shift in copied.moved.items():
            click.echo(f"  ids of {table} were taken in the target: moved by +{shift}")
