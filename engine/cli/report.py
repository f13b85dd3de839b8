"""`rules report`: a session as one self-contained HTML page."""

from __future__ import annotations

import sys
from typing import TextIO

import click

from engine.cli.common import EXIT_OK, UsageFailure
from engine.cli.options import output_option
from engine.cli.session_options import ledger_option, session_option
from engine.core.errors import EngineError
from engine.report import render
from engine.session.export import attempt_rows
from engine.session.review import session_figures
from engine.session.session_ref import SessionRef


@click.command("report")
@session_option("Session folder whose ledger to show (with a PostgreSQL --ledger: the name).")
@ledger_option()
@output_option("HTML file to write (default: stdout).")
@click.option("--title", default=None, help="Page title (default: the session folder).")
def report_command(
    session_dir: str, ledger_url: str | None, output: TextIO, title: str | None
) -> None:
    """Write a session's attempts as one HTML page: inline CSS and SVG, no script, no network.

    Per item the attempts as a timeline (verdict, failure type, action), the pass rate by
    attempt number, failures by type and the example tiers used with their success (the
    next attempt of the item was accepted), and the reviews people resolved (queue depth
    and age, resolutions, time to resolve, share of edits). The figures are those of
    `rules log --format json` on the same session. The ledger is read once, row by row;
    the page draws the timelines of the first 500 items (50 attempts each) and counts
    every attempt.

    \b
    Examples:
      rules run --pack sentinel --block "$BLOCK" -- model-cli
      rules report -o report.html                 # the session of .rules-session/
      rules report --session runs/42 -o runs/42/report.html

    \b
    Exit status: 0 written, 2 not a session folder or unreadable ledger.
    """
    try:
        session = SessionRef(session_dir, ledger_url)
        rows = attempt_rows(session)
        queue = session_figures(session)
        html = render("session", "html", rows, title or f"Session {session_dir}", queue)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    output.write(html)
    output.flush()
    sys.exit(EXIT_OK)
