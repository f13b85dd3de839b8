"""`rules log`: views of a session's ledger."""

from __future__ import annotations

import json
import sys

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import open_pack
from engine.cli.options import pack_option
from engine.cli.session_options import ledger_option, session_option
from engine.core.errors import EngineError
from engine.report import render
from engine.session.evaluation import InputRefused
from engine.session.session_ref import SessionRef
from engine.session.views import VIEW_PACK, LogRequest, attempts_json, session_log


@click.command("log")
@session_option("Session folder (with a PostgreSQL --ledger: the session's name in it).")
@ledger_option()
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["md", "json", "jsonl"]),
    default="md",
    show_default=True,
    help="md: the pack's markdown log views; json/jsonl: every attempt.",
)
@click.option(
    "--view",
    default="all",
    show_default=True,
    metavar="NAME",
    help="all: every log template of the pack that writes --format (md: the "
    "validation and example logs of the shipped packs); NAME: the pack's log "
    "template NAME, e.g. `--format jsonl --view failures` for the quality-gate pack's gate "
    "failure log (one line per failed evaluation); decisions: the decisions record of "
    "the session's resolved conflicts (the pack's `conflicts.decisions` template); "
    "usage: tokens and cost by kind of attempt (first, repair, retry, transport_retry); "
    "shadow: the would-be flips `rules serve --shadow` recorded, as `rules backtest` "
    "reports (in --ledger, else in SESSION/_shadow/ledger.db where SESSION is the "
    "server's --sessions-dir).",
)
@pack_option(
    "Pack whose log templates render the views. Default: the session's "
    f"pack when it is a builtin with log templates, else {VIEW_PACK}.",
    required=False,
)
def log_command(
    session_dir: str, ledger_url: str | None, output_format: str, view: str, pack_ref: str | None
) -> None:
    """Show a session's ledger: attempts, decisions, examples used.

    The ledger is opened read-only: read access is enough (e.g. on read-only media).

    \b
    Examples:
      rules log                                   # .rules-session/ as markdown
      rules log --session runs/42 --view examples
      rules log --session runs/42 --format jsonl > attempts.jsonl
      rules log --session runs/42 --format jsonl --view failures
      rules log --session runs/42 --pack session-logs --view validation  # a pack's view
      rules log --session runs/42 --view usage    # tokens and cost, repairs apart
      rules log --session sessions --view shadow  # a server's candidate packs
    """
    if view == "shadow":
        click.echo(_shadow(session_dir, ledger_url, output_format), nl=False)
        return
    session = SessionRef(session_dir, ledger_url)
    try:
        if not session.exists():
            raise UsageFailure(
                f"{session_dir}: no ledger here (run `rules run` or `rules eval --session` first)"
            )
        every = output_format == "json" or (output_format == "jsonl" and view == "all")
        if every and view not in ("decisions", "usage"):
            for piece in attempts_json(session, lines=output_format == "jsonl"):
                sys.stdout.write(piece)
            sys.stdout.flush()
            return
        shown = session_log(LogRequest(session, view, output_format, pack_ref), open_pack)
    except InputRefused as exc:
        raise UsageFailure(exc.said(lambda field: "--format")) from None
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(shown, nl=False)


def _shadow(session_dir: str, ledger_url: str | None, output_format: str) -> str:
    """The shadow evaluations of a server's ledger, one backtest report per served pack and
    candidate (md: the backtest's markdown; json, jsonl: its documents)."""
    # Deferred: the backtest's modules are 0.45 s of imports (python -X importtime) that
    # the other views of `rules log` do not need.
    from engine.backtest.shadow import NoShadowLedger, recorded_shadows, shadow_location

    try:
        shadows = recorded_shadows(shadow_location(ledger_url, session_dir), existing=True)
    except NoShadowLedger as exc:
        raise UsageFailure(
            f"{exc.shown}: no shadow ledger here (`rules serve --shadow NAME=CANDIDATE` records "
            "one in its --ledger, else under its --sessions-dir: give that as --ledger "
            "or as --session)"
        ) from None
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if output_format == "json":
        return json.dumps({"shadows": shadows}, indent=2, ensure_ascii=False) + "\n"
    if output_format == "jsonl":
        return "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in shadows)
    if not shadows:
        return "No shadow evaluations recorded.\n"
    parts = [
        f"# Shadow: {s['candidate']} against the live pack {s['pack']}\n\n"
        + render("backtest", "md", s["report"])
        for s in shadows
    ]
    return "\n".join(parts)
