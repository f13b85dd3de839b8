"""`rules log`: views of a session's ledger."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from engine.cli.common import UsageFailure, open_pack
from engine.cli.options import ledger_option, pack_option, session_option
from engine.core.errors import EngineError
from engine.core.resources import builtin_pack_names
from engine.ledger.store import Place, SessionLedger, locate
from engine.pack.compiled import Pack
from engine.session.choice_book import ChoiceBook
from engine.session.conflicts import ConflictBook
from engine.session.views import json_text, log_variables, log_views, render_log

VIEW_PACK = "session-logs"  # the shipped log views, for sessions of packs without their own


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
      rules log --session runs/42 --pack ./my-pack --view summary
      rules log --session sessions --view shadow  # a server's candidate packs
    """
    if view == "shadow":
        click.echo(_shadow(session_dir, ledger_url, output_format), nl=False)
        return
    try:
        place = locate(session_dir, ledger_url)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if not place.exists():
        raise UsageFailure(
            f"{session_dir}: no ledger here (run `rules run` or `rules eval --session` first)"
        )
    if view == "decisions":
        click.echo(_decisions(place, pack_ref), nl=False)
        return
    if output_format == "json" or (output_format == "jsonl" and view == "all"):
        _write_attempts(place, lines=output_format == "jsonl")
        return
    try:
        with SessionLedger(place, read_only=True) as ledger:
            rows = ledger.attempts()
            gate_rows = ledger.gate_results()
            failed_gates = ledger.failed_gates()
            book = ChoiceBook(ledger)
            choices = book.all_choices()
            round_numbers = sorted({r["round"] for r in rows if r["round"] is not None})
            pack = open_pack(pack_ref) if pack_ref else _session_pack(rows)
            rounds = pack.model.rounds
            statuses = {n: book.statuses(rounds, n) for n in round_numbers} if rounds else {}
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    names = log_views(pack, output_format) if view == "all" else [view]
    try:
        parts = [
            render_log(
                pack,
                name,
                log_variables(rows, session_dir, gate_rows, choices, statuses, failed_gates),
            )
            for name in names
        ]
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    written = pack.model.templates[view].format if view != "all" else output_format
    if written != output_format:
        raise UsageFailure(f"log view {view!r} writes {written}; use --format {written}")
    click.echo("\n".join(parts), nl=False)


def _write_attempts(place: Place, lines: bool) -> None:
    """Every attempt with its warnings as JSON (or JSON Lines), written as it is read."""
    try:
        with SessionLedger(place, read_only=True) as ledger:
            for piece in json_text(ledger.attempt_rows(warnings=True), lines):
                sys.stdout.write(piece)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    sys.stdout.flush()


def _session_pack(rows: list[dict[str, Any]]) -> Pack:
    """The pack of the session's latest attempt when it is a builtin with log templates,
    else the shipped log views."""
    name = rows[-1]["pack"] if rows else VIEW_PACK
    if name != VIEW_PACK and name in builtin_pack_names():
        pack = open_pack(name)
        if any(spec.purpose == "log" for spec in pack.model.templates.values()):
            return pack
    return open_pack(VIEW_PACK)


def _decisions(place: Place, pack_ref: str | None) -> str:
    """The decisions record: resolved conflicts grouped by round, in priority order."""
    try:
        with SessionLedger(place, read_only=True) as ledger:
            book = ConflictBook(ledger)
            recorded = ledger.latest_conflict_pack()
            if pack_ref is None and recorded is None:
                return ""
            pack = open_pack(pack_ref or str(recorded))
            if pack.conflicts is None:
                raise UsageFailure(f"pack {pack.name!r} declares no `conflicts:` section")
            rounds: dict[Any, list[dict[str, Any]]] = {}
            for record in book.resolutions(pack.conflicts):
                rounds.setdefault(record["round"], []).append(record)
        ordered = sorted(rounds.items(), key=lambda pair: (pair[0] is None, pair[0] or 0))
        return pack.render_conflicts(
            pack.conflicts.spec.decisions,
            {"rounds": [{"round": r, "conflicts": c} for r, c in ordered]},
        )
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def _shadow(session_dir: str, ledger_url: str | None, output_format: str) -> str:
    """The shadow evaluations of a server's ledger, one backtest report per served pack and
    candidate (md: the backtest's markdown; json, jsonl: its documents)."""
    # Deferred for start-up time: the other views need neither the backtest nor the ledger.
    from engine.backtest.shadow import shadow_reports
    from engine.ledger.connection import open_ledger
    from engine.ledger.shadow import ShadowLog, default_location
    from engine.ledger.url import parse_url
    from engine.report import render

    try:
        url = parse_url(ledger_url or default_location(session_dir))
        if url.path is not None and not url.path.is_file():
            raise UsageFailure(
                f"{url}: no shadow ledger here (`rules serve --shadow NAME=CANDIDATE` records "
                "one in its --ledger, else under its --sessions-dir: give that as --ledger "
                "or as --session)"
            )
        with open_ledger(url) as ledger:
            shadows = shadow_reports(ShadowLog(ledger), str(url))
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
