"""Self-contained HTML pages: a session's attempts, or a backtest's flips.

One file, inline CSS and SVG, no script, nothing fetched: it works offline and reads
without colour (every mark carries its word, bars carry their number). Numbers come from
the same ledger rows as `rules log --format json`; each figure also sits in a
``data-figure`` attribute so tools can read it back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

Row = Mapping[str, Any]

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#111}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .6em}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.tl{display:flex;flex-wrap:wrap;margin:.2em 0}
.a{border:2px solid #555;padding:.1em .5em;border-radius:.3em;font-size:.9em;margin:0 .3em .3em 0}
.pass,.warn{border-style:solid}.fail{border-style:dashed;background:#fbeaea}
.warn{background:#fff6dc}.pass{background:#e6f4e6}
svg text{font:12px system-ui,sans-serif}
"""


def _figure(value: Any, name: str) -> str:
    return f'<span data-figure="{escape(name)}">{escape(str(value))}</span>'


def _cell(value: Any, name: str | None = None) -> str:
    inner = _figure(value, name) if name else escape(str(value))
    return f'<td class="n">{inner}</td>' if isinstance(value, int | float) else f"<td>{inner}</td>"


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], figures: str = "") -> str:
    """A table; with ``figures``, numeric cells carry data-figure="FIGURES:ROWKEY:COLUMN"."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = []
    for row in rows:
        key = str(row[0])
        cells = [
            _cell(v, f"{figures}:{key}:{header[i]}" if figures and i else None)
            for i, v in enumerate(row)
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def bar_chart(bars: Sequence[tuple[str, float, str]], unit: str = "") -> str:
    """Horizontal bars (label, value, shown text) as inline SVG."""
    if not bars:
        return "<p>None.</p>"
    top = max(value for _, value, _ in bars) or 1
    height = 22 * len(bars) + 4
    parts = [
        f'<svg width="560" height="{height}" viewBox="0 0 560 {height}" '
        f'xmlns="http://www.w3.org/2000/svg"><title>{escape(unit)}</title>'
    ]
    for n, (label, value, shown) in enumerate(bars):
        y = 22 * n + 2
        width = int(300 * value / top)
        parts.append(
            f'<text x="0" y="{y + 15}">{escape(label)}</text>'
            f'<rect x="170" y="{y}" width="{width}" height="18" fill="#777" stroke="#000"/>'
            f'<text x="{176 + width}" y="{y + 15}">{escape(shown)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<h2>{escape(heading)}</h2>{html}" for heading, html in sections)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head>"
        f"<body><h1>{escape(title)}</h1>{body}</body></html>\n"
    )


# --- a session ------------------------------------------------------------------------------


TIMELINE_ITEMS = 500
"""Items a session page draws as timelines (the first ones); its figures count them all."""
TIMELINE_ATTEMPTS = 50
"""Attempts drawn per item (the first ones)."""


@dataclass
class SessionSummary:
    """What a session page shows, gathered in one pass over the ledger's rows: memory
    grows with the items, not the attempts, and the page draws a bounded number."""

    figures: dict[str, Any]
    """As `rules log --format json` counts them: attempts, items, by_attempt, failures,
    tiers."""
    timeline: dict[tuple[str, str], list[Row]]
    hidden_attempts: Counter[tuple[str, str]]


def session_summary(rows: Iterable[Row]) -> SessionSummary:
    """The figures and timelines of a session's attempt rows (oldest first). A tier
    succeeded when the next attempt of its item was accepted."""
    by_attempt: dict[int, Counter[str]] = {}
    failures: Counter[str] = Counter()
    tiers: dict[str, Counter[str]] = {}
    pending_tier: dict[tuple[str, str], str | None] = {}  # every item seen: its last tier
    timeline: dict[tuple[str, str], list[Row]] = {}
    hidden: Counter[tuple[str, str]] = Counter()
    attempts = 0
    for row in rows:
        attempts += 1
        key = (str(row["block"]), str(row["item"]))
        accepted = row["status"] in ("pass", "warn")
        counts = by_attempt.setdefault(int(row["attempt"]), Counter())
        counts["attempts"] += 1
        counts["accepted"] += accepted
        if row["failure_type"]:
            failures[row["failure_type"]] += 1
        earlier_tier = pending_tier.get(key)
        if earlier_tier is not None:
            tiers[earlier_tier]["succeeded"] += accepted
        tier = row.get("example_tier") or None
        if tier is not None:
            tiers.setdefault(tier, Counter())["used"] += 1
        pending_tier[key] = tier
        shown = timeline.get(key)
        if shown is None and len(pending_tier) <= TIMELINE_ITEMS:  # among the first items
            shown = timeline[key] = []
        if shown is not None and len(shown) < TIMELINE_ATTEMPTS:
            shown.append(row)
        elif shown is not None:
            hidden[key] += 1
    figures = {
        "attempts": attempts,
        "items": len(pending_tier),
        "by_attempt": {n: dict(c) for n, c in sorted(by_attempt.items())},
        "failures": dict(failures.most_common()),
        "tiers": {t: {"used": 0, "succeeded": 0, **c} for t, c in sorted(tiers.items())},
    }
    return SessionSummary(figures, timeline, hidden)


def _timeline(summary: SessionSummary) -> str:
    out = []
    for (block, item), attempts in summary.timeline.items():
        marks = "".join(
            f'<span class="a {escape(str(r["status"]))}" title="{escape(str(r["error"] or ""))}">'
            f"#{r['attempt']} {escape(str(r['status']))}"
            f"{' ' + escape(str(r['failure_type'])) if r['failure_type'] else ''}"
            f" &rarr; {escape(str(r['action']))}</span>"
            for r in attempts
        )
        more = summary.hidden_attempts[(block, item)]
        if more:
            marks += f'<span class="a">and {more} more</span>'
        out.append(
            f"<div><strong>{escape(block)}</strong> <code>{escape(item)}</code>"
            f'<div class="tl">{marks}</div></div>'
        )
    items = summary.figures["items"]
    if items > len(summary.timeline):
        out.append(
            f"<p>The first {len(summary.timeline)} of {items} items are drawn; "
            "<code>rules log --format jsonl</code> lists every attempt.</p>"
        )
    return "".join(out) or "<p>No attempts.</p>"


def session_page(rows: Iterable[Row], title: str) -> str:
    summary = session_summary(rows)
    figures = summary.figures
    rates = [
        (
            f"attempt {n}",
            c["accepted"] / c["attempts"],
            f"{100 * c['accepted'] / c['attempts']:.0f}% ({c['accepted']}/{c['attempts']})",
        )
        for n, c in figures["by_attempt"].items()
    ]
    overview = table(
        ["figure", "value"],
        [["attempts", figures["attempts"]], ["items", figures["items"]]],
        "session",
    )
    return page(
        title,
        [
            ("Overview", overview),
            ("Attempts per item", _timeline(summary)),
            (
                "Pass rate by attempt number",
                bar_chart(rates, "pass rate by attempt number")
                + table(
                    ["attempt", "attempts", "accepted"],
                    [[n, c["attempts"], c["accepted"]] for n, c in figures["by_attempt"].items()],
                    "by_attempt",
                ),
            ),
            (
                "Failures by type",
                bar_chart(
                    [(t, n, str(n)) for t, n in figures["failures"].items()], "failures by type"
                )
                + table(["failure type", "attempts"], figures["failures"].items(), "failures"),
            ),
            (
                "Example tiers",
                table(
                    ["tier", "used", "succeeded"],
                    [
                        [t, c.get("used", 0), c.get("succeeded", 0)]
                        for t, c in figures["tiers"].items()
                    ],
                    "tiers",
                )
                if figures["tiers"]
                else "<p>No examples were attached.</p>",
            ),
        ],
    )


# --- a backtest -----------------------------------------------------------------------------


def backtest_page(report: Mapping[str, Any], title: str = "Backtest") -> str:
    """The report of `rules backtest --format json` as a page, with the flip matrices."""
    summary = report["summary"]
    sides = [("pack", summary["pack"])]
    if "baseline" in summary:
        sides.insert(0, ("baseline", summary["baseline"]))
    statuses = sorted({k for _, s in sides for k in s["status"]})
    actions = sorted({k for _, s in sides for k in s["actions"]})
    totals = table(
        ["pack", *statuses, *actions, "further attempts"],
        [
            [
                f"{label}: {s['ref']}",
                *[s["status"].get(k, 0) for k in statuses],
                *[s["actions"].get(a, 0) for a in actions],
                s["further_attempts"],
            ]
            for label, s in sides
        ],
    )
    sections = [("Totals", f"<p>{_figure(report['total'], 'total')} records.</p>{totals}")]
    if "baseline" in summary:
        flips = report["flips"]
        for name, keys in (("Verdict flips", statuses), ("Action flips", actions)):
            rows = [
                [f"from {a}", *[flips.get(f"{a}->{b}", 0) if a != b else "-" for b in keys]]
                for a in keys
            ]
            sections.append((name, table(["baseline \\ pack", *[f"to {k}" for k in keys]], rows)))
        examples = [
            f"<li><code>{escape(kind)}</code> {escape(e['where'])}: "
            f"{escape(e['pack']['error'] or e['baseline']['error'] or '')}</li>"
            for kind, found in report["examples"].items()
            for e in found
        ]
        sections.append(
            (
                f"Flipped records: {report['flipped']}",
                f"<ul>{''.join(examples)}</ul>" if examples else "<p>No flips.</p>",
            )
        )
    return page(title, sections)
