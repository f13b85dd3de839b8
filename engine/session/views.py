"""The log views use case (`rules log`): a session's ledger as the generic exports (JSON,
JSONL), as the log templates of packs render its rows, and as the decisions record of its
resolved conflicts. The layouts (seed 003's validation log, seed 000's example log, seed
004's gate failure log) are templates of the packs, never code here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2

from engine.core.errors import EngineError, PackError
from engine.core.resources import builtin_pack_names
from engine.ledger.store import SessionLedger
from engine.pack.compiled import Pack
from engine.sandbox.environment import ENVIRONMENT
from engine.session.choice_book import ChoiceBook
from engine.session.conflicts import ConflictBook
from engine.session.evaluation import InputRefused
from engine.session.session_ref import SessionRef
from engine.session.summary import KINDS, session_summary

Row = dict[str, Any]
OpenPack = Callable[[str], Pack]
"""How the caller opens a pack by name or path (the CLI: from its cache, --locked kept)."""

VIEW_PACK = "session-logs"
"""The shipped log views, for sessions of packs without their own."""


@dataclass(frozen=True)
class LogRequest:
    """A view of a session's ledger: ``view`` (``all``: every log template of the pack
    that writes ``output_format``; else a template's name, or ``decisions``) rendered by
    the log templates of ``pack`` (a name or path; None: the session's own pack when it is
    a builtin with log templates, else the shipped views)."""

    session: SessionRef
    view: str = "all"
    output_format: str = "md"
    pack: str | None = None


def attempts_json(session: SessionRef, lines: bool) -> Iterator[str]:
    """Every attempt of the session with its warnings as one JSON array or as JSON Lines,
    a piece at a time, read as it is written (``json_text``)."""
    with SessionLedger(session.place(), read_only=True) as ledger:
        yield from json_text(ledger.attempt_rows(warnings=True), lines)


USAGE = "usage"
"""The view of what the session's model calls used and cost, by kind of attempt."""


def usage_view(session: SessionRef, output_format: str) -> str:
    """Tokens and cost by kind of attempt (first, repair, retry, transport_retry), so
    repairs and transport retries show apart: a markdown table, or the figures as JSON."""
    with SessionLedger(session.place(), read_only=True) as ledger:
        figures = session_summary(ledger.attempt_rows()).figures
    usage: dict[str, Any] = figures.get("usage", {})
    streams: dict[str, int] | None = figures.get("streams")
    if output_format in ("json", "jsonl"):
        indent = 2 if output_format == "json" else None
        shown = {"usage": usage, **({"streams": streams} if streams else {})}
        return json.dumps(shown, indent=indent, ensure_ascii=False) + "\n"
    if not usage:
        return "No model call of this session recorded its tokens.\n" + streams_line(streams)
    lines = [
        "| kind | attempts | tokens in | tokens out | estimated | cost |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    total = {"attempts": 0, "tokens_in": 0, "tokens_out": 0, "estimated": 0, "cost": 0.0}
    for kind, counts in usage.items():
        for key in total:
            total[key] += counts[key]
        lines.append(_usage_line(kind, counts))
    lines.append(_usage_line("total", total))
    kinds = ", ".join(KINDS)
    return (
        "\n".join(lines)
        + f"\n\nKinds: {kinds}. Estimated tokens are counted from characters; cost is at "
        "the pack's `model_calls.pricing`.\n" + streams_line(streams)
    )


def streams_line(streams: Mapping[str, int] | None) -> str:
    """What streamed outputs saved, as a line under the usage table ("" without one): the
    streams closed early at a definite failure and the tokens they did not generate."""
    if not streams or not streams["cut"]:
        return ""
    left = streams["tokens_not_generated"]
    how = (
        f"at most {left} (estimated: the output cap in tokens, less what was generated)"
        if streams["estimated"]
        else str(left)
    )
    return (
        f"\nStreams: {streams['streamed']} read, {streams['cut']} closed early; "
        f"tokens not generated: {how}.\n"
    )


def _usage_line(kind: str, counts: Mapping[str, Any]) -> str:
    return (
        f"| {kind} | {counts['attempts']} | {counts['tokens_in']} | {counts['tokens_out']} "
        f"| {counts['estimated']} | {counts['cost']:.6f} |"
    )


def session_log(request: LogRequest, open_pack: OpenPack) -> str:
    """The views ``request`` asks for, as the pack's log templates render them."""
    if request.view == "decisions":
        return decisions_record(request.session, request.pack, open_pack)
    if request.view == USAGE:
        return usage_view(request.session, request.output_format)
    with SessionLedger(request.session.place(), read_only=True) as ledger:
        rows = ledger.attempts()
        gate_rows = ledger.gate_results()
        failed_gates = ledger.failed_gates()
        book = ChoiceBook(ledger)
        choices = book.all_choices()
        round_numbers = sorted({r["round"] for r in rows if r["round"] is not None})
        pack = open_pack(request.pack) if request.pack else _session_pack(rows, open_pack)
        rounds = pack.model.rounds
        statuses = {n: book.statuses(rounds, n) for n in round_numbers} if rounds else {}
    view, output_format = request.view, request.output_format
    names = log_views(pack, output_format) if view == "all" else [view]
    folder = str(request.session.where)
    variables = log_variables(rows, folder, gate_rows, choices, statuses, failed_gates)
    parts = [render_log(pack, name, variables) for name in names]
    written = pack.model.templates[view].format if view != "all" else output_format
    if written != output_format:
        raise InputRefused(
            "log view {view} writes {written}; use {0} {written}",
            ("output_format",),
            view=repr(view),
            written=written,
        )
    return "\n".join(parts)


def _session_pack(rows: list[dict[str, Any]], open_pack: OpenPack) -> Pack:
    """The pack of the session's latest attempt when it is a builtin with log templates,
    else the shipped log views."""
    name = rows[-1]["pack"] if rows else VIEW_PACK
    if name != VIEW_PACK and name in builtin_pack_names():
        pack = open_pack(name)
        if any(spec.purpose == "log" for spec in pack.model.templates.values()):
            return pack
    return open_pack(VIEW_PACK)


def decisions_record(session: SessionRef, pack_ref: str | None, open_pack: OpenPack) -> str:
    """The decisions record: resolved conflicts grouped by round, in priority order, as
    the pack's ``conflicts.decisions`` template writes it (empty when no conflict was
    recorded and no pack is given)."""
    with SessionLedger(session.place(), read_only=True) as ledger:
        book = ConflictBook(ledger)
        recorded = ledger.latest_conflict_pack()
        if pack_ref is None and recorded is None:
            return ""
        pack = open_pack(pack_ref or str(recorded))
        if pack.conflicts is None:
            raise EngineError(f"pack {pack.name!r} declares no `conflicts:` section")
        rounds: dict[Any, list[dict[str, Any]]] = {}
        for record in book.resolutions(pack.conflicts):
            rounds.setdefault(record["round"], []).append(record)
    ordered = sorted(rounds.items(), key=lambda pair: (pair[0] is None, pair[0] or 0))
    return pack.render_conflicts(
        pack.conflicts.spec.decisions,
        {"rounds": [{"round": r, "conflicts": c} for r, c in ordered]},
    )


def _with_next(rows: list[Row]) -> list[Row]:
    """The rows, each with ``next``: the next attempt of the same run of the same item
    among ``rows``."""
    latest: dict[tuple[str, str, int], Row] = {}
    out: list[Row] = []
    for row in reversed(rows):
        key = (row["block"], row["item"], row.get("run", 1))
        entry = {**row, "next": latest.get(key)}
        latest[key] = row
        out.append(entry)
    out.reverse()
    return out


def _grouped(rows: Iterable[Row], *fields: str) -> dict[tuple[Any, ...], list[Row]]:
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        # a row without a run (given by a caller, not read from a ledger) is of run 1
        key = tuple(row.get(f, 1) if f == "run" else row[f] for f in fields)
        groups.setdefault(key, []).append(row)
    return groups


def log_variables(
    rows: list[Row],
    session: str = "",
    gate_results: list[Row] | None = None,
    choices: list[Row] | None = None,
    statuses: dict[int, dict[str, str | None]] | None = None,
    failed_gates: list[Row] | None = None,
) -> dict[str, Any]:
    """What a log template sees: ``entries`` (every row with ``next``), ``rounds`` (per
    round in order of first appearance: ``number``, ``entries`` with ``next`` inside the
    round, ``by_item``: [{block, item, run, attempts}] (each run of an item apart: a
    final decision ends a run, the item's next output starts the next), ``choices`` (the
    user's choices in the round) and ``statuses`` ({block: status} when the pack
    declares `rounds:`)), ``session`` (the folder), ``gate_results`` (every recorded
    quality gate result, oldest first) and ``failed_gates`` (the gate failure log's
    lines, ``{timestamp, gate_result, reprompt_generated}``, oldest first)."""
    rounds = []
    for (number,), round_rows in _grouped(rows, "round").items():
        rounds.append(
            {
                "number": number,
                "entries": _with_next(round_rows),
                "by_item": [
                    {"block": block, "item": item, "run": run, "attempts": attempts}
                    for (block, item, run), attempts in _grouped(
                        round_rows, "block", "item", "run"
                    ).items()
                ],
                "choices": [c for c in choices or [] if c["round"] == number],
                "statuses": (statuses or {}).get(number, {}),
            }
        )
    return {
        "entries": _with_next(rows),
        "rounds": rounds,
        "session": session,
        "gate_results": list(gate_results or []),
        "failed_gates": list(failed_gates or []),
    }


def log_views(pack: Pack, output_format: str) -> list[str]:
    """The names of the pack's log templates that write ``output_format``, in pack order."""
    return [
        name
        for name, spec in pack.model.templates.items()
        if spec.purpose == "log" and spec.format == output_format
    ]


def render_log(pack: Pack, view: str, variables: Mapping[str, Any]) -> str:
    """The pack's log template ``view`` filled with ``variables`` (``log_variables``)."""
    spec = pack.model.templates.get(view)
    if spec is None or spec.purpose != "log":
        known = ", ".join(n for n, s in pack.model.templates.items() if s.purpose == "log")
        raise EngineError(
            f"pack {pack.name!r} has no log view {view!r} (log views: {known or 'none'})"
        )
    try:
        template = ENVIRONMENT.from_string(pack.prompts.log_sources[view])
    except jinja2.TemplateError as exc:
        raise PackError(f"pack {pack.name!r}: log template {view!r}: {exc}") from None
    return template.render(variables)


def json_text(rows: Iterable[Row], lines: bool = False) -> Iterator[str]:
    """``rows`` as one JSON array (``json.dumps(list, indent=2)`` to the byte) or as JSON
    Lines, a piece per row: written as the rows are read, memory stays constant."""
    if lines:
        for row in rows:
            yield json.dumps(row, ensure_ascii=False) + "\n"
        return
    opened = False
    for row in rows:
        text = json.dumps(row, indent=2, ensure_ascii=False).replace("\n", "\n  ")
        yield ("[\n  " if not opened else ",\n  ") + text
        opened = True
    yield "\n]\n" if opened else "[]\n"
