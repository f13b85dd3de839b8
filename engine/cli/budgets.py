"""`rules budgets`: what a pack's budgets have spent and where its breakers stand."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import open_pack
from engine.cli.options import pack_option
from engine.cli.session_options import ledger_option, session_option
from engine.core.errors import EngineError
from engine.report import formats, render
from engine.session.budgets import BudgetsRequest, spending_report
from engine.session.session_ref import SessionRef


@click.command("budgets")
@pack_option()
@session_option("Session folder (with a PostgreSQL --ledger: the session's name in it).")
@ledger_option()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(formats("budgets")),
    default="text",
    show_default=True,
    help="text: tables; json: the document GET /v1/budgets answers.",
)
def budgets_command(
    pack_ref: str, session_dir: str, ledger_url: str | None, output_format: str
) -> None:
    """Show each budget's spend against its limit and each breaker's state.

    A fleet budget and a breaker count every session of the ledger; a session budget the
    session's calls; a budget per item run the most any item run of the session spent.
    The ledger is read only.

    \b
    Examples:
      rules budgets --pack ./my-pack
      rules budgets --pack ./my-pack --session runs/42 --format json
      rules budgets --pack ./my-pack --ledger postgresql://rules@db/ledger --session s1
    """
    pack = open_pack(pack_ref)
    try:
        report = spending_report(pack, BudgetsRequest(SessionRef(session_dir, ledger_url)))
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(render("budgets", output_format, report), nl=False)
