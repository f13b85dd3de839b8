"""`rules choose`: answer the menu of an item's final decision."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import load_context, open_pack
from engine.cli.options import pack_option
from engine.cli.session_options import ledger_option, session_option
from engine.core import clock
from engine.core.errors import EngineError
from engine.session.choose import ChoiceRequest, choose, recorded_pack
from engine.session.choose import resume as resume_session
from engine.session.session_ref import SessionRef


@click.command("choose")
@session_option(
    "Session folder whose ledger holds the item (with a PostgreSQL --ledger: the session's "
    "name in it)."
)
@ledger_option()
@pack_option("Pack (default: the item's recorded pack).", required=False)
@click.option(
    "--context",
    "context_file",
    type=click.Path(dir_okay=False),
    help="Context for the prompt a retry option prints (YAML or JSON).",
)
@click.option("--text", default=None, help="The user's text (options that add context).")
@click.option("--now", default=None, metavar="ISO8601", help="Time of the choice.")
@click.option("--resume", is_flag=True, help="Resume a session a choice paused.")
@click.argument("item", required=False)
@click.argument("option", required=False)
def choose_command(
    session_dir: str,
    ledger_url: str | None,
    pack_ref: str | None,
    context_file: str | None,
    text: str | None,
    now: str | None,
    resume: bool,
    item: str | None,
    option: str | None,
) -> None:
    """Record the user's choice on ITEM's final decision and apply its effect.

    ITEM is BLOCK@ROUND (e.g. author@3) or BLOCK (its latest attempt); OPTION is the
    number of an option of the menu the decision offered (`after_failure.menu`) or its
    key. Effects: a round status for the block (e.g. SKIP), more attempts with --text in
    the next prompt (printed on stdout), the end of the item with an action, or a pause
    (`rules eval --session` refuses until `rules choose --resume`).

    \b
    Examples:
      rules choose --session runs/1 author@3 1                       # skip this round
      rules choose --session runs/1 --context ctx.yaml author@4 3 \\
          --text "The flow diagram is in docs/flow.md"               # one more retry
      rules choose --session runs/1 --resume

    \b
    Exit status: 0 recorded; the action's code when the choice ends the item or every
    block of the round has failed (e.g. 1 for ESCALATE); 2 usage error (nothing pending,
    an option the menu does not offer).
    """
    session = SessionRef(session_dir, ledger_url)
    try:
        exists = session.exists()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if not exists:
        raise UsageFailure(f"{session_dir}: no ledger here")
    try:
        stamp = clock.iso(clock.now(now))
        if resume:
            resume_session(session)
            click.echo(f"{session_dir}: resumed")
            return
        if item is None or option is None:
            raise UsageFailure("give ITEM and OPTION (or --resume)")
        pack = open_pack(pack_ref or recorded_pack(session, item))
        context = load_context(context_file)
        result = choose(pack, session, ChoiceRequest(item, option, stamp, text, context))
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(f"{result.item}: {result.option} ({result.label}) -> {result.effect}", err=True)
    for block, status in result.statuses.items():
        click.echo(f"  {block}: {status}", err=True)
    if result.prompt is not None:
        click.echo(result.prompt, nl=False)
    if result.escalation is not None:
        action, message, code = result.escalation
        click.echo(f"{action}: {message}", err=True)
        raise SystemExit(code)
    if result.end is not None:
        raise SystemExit(result.end[1])
