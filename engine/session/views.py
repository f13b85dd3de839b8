"""Views of the ledger: the generic exports (JSON, JSONL) and the rows as log templates of
packs see them. The layouts (seed 003's validation log, seed 000's example log, seed 004's
gate failure log) are templates of the packs, never code here."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import jinja2

from engine.core.errors import EngineError, PackError
from engine.pack.compiled import Pack
from engine.sandbox.environment import ENVIRONMENT

Row = dict[str, Any]


def _with_next(rows: list[Row]) -> list[Row]:
    """The rows, each with ``next``: the next attempt of the same item among ``rows``."""
    latest: dict[tuple[str, str], Row] = {}
    out: list[Row] = []
    for row in reversed(rows):
        key = (row["block"], row["item"])
        entry = {**row, "next": latest.get(key)}
        latest[key] = row
        out.append(entry)
    out.reverse()
    return out


def _grouped(rows: Iterable[Row], *fields: str) -> dict[tuple[Any, ...], list[Row]]:
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[f] for f in fields), []).append(row)
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
    round, ``by_item``: [{block, item, attempts}], ``choices`` (the user's choices in the
    round) and ``statuses`` ({block: status} when the pack declares `rounds:`)),
    ``session`` (the folder), ``gate_results`` (every recorded quality gate result,
    oldest first) and ``failed_gates`` (the gate failure log's lines, ``{timestamp,
    gate_result, reprompt_generated}``, oldest first)."""
    rounds = []
    for (number,), round_rows in _grouped(rows, "round").items():
        rounds.append(
            {
                "number": number,
                "entries": _with_next(round_rows),
                "by_item": [
                    {"block": block, "item": item, "attempts": attempts}
                    for (block, item), attempts in _grouped(round_rows, "block", "item").items()
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
