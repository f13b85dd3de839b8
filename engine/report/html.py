"""Self-contained HTML pages: a session's attempts, or a backtest's flips.

One file, inline CSS and SVG, no script, nothing fetched: it works offline and reads
without colour (every mark carries its word, bars carry their number). Numbers come from
the same ledger rows as `rules log --format json`; each figure also sits in a
``data-figure`` attribute so tools can read it back. The pages are Jinja2 templates
(``templates/``) with autoescape: a model's text shows as text, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from engine.report.table import deciding_rules
from engine.session.summary import Row, session_summary

if TYPE_CHECKING:
    import jinja2

TEMPLATES = Path(__file__).parent / "templates"

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#111}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #999}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .6em}
th{background:#eee;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.tl{display:flex;flex-wrap:wrap;margin:.2em 0}
.a{border:2px solid #555;padding:.1em .5em;border-radius:.3em;font-size:.9em;margin:0 .3em .3em 0}
.pass,.warn{border-style:solid}.fail{border-style:dashed;background:#fbeaea}
.warn{background:#fff6dc}.pass{background:#e6f4e6}
.run{margin:.6em 0}.run .meta{color:#444;font-size:.9em}
svg text{font:12px system-ui,sans-serif}
"""


@cache
def _environment() -> jinja2.Environment:
    import jinja2  # deferred for start-up time: only the html format needs Jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[],
        undefined=jinja2.StrictUndefined,
    )


def _render(template: str, **values: Any) -> str:
    page: str = _environment().get_template(template).render(css=Markup(CSS), **values)
    return page


def render_page(template: str, **values: Any) -> str:
    """The page ``template`` of ``templates/`` with ``values`` (autoescaped), styled as
    every page of the engine (the review pages of ``engine.report.reviews``)."""
    return _render(template, **values)


def session(rows: Iterable[Row], title: str, reviews: Mapping[str, Any] | None = None) -> str:
    """A session's attempts as a page a team shares: the packs and revisions that decided,
    when, how each run ended (runs by final action), attempts per run, what repairs cost,
    each run's timeline under its item's name, the pass rate by attempt number, the
    failures by type and the example tiers; with ``reviews`` (the review queue's figures,
    ``engine.session.review.figures``) its depth, age, resolutions, time to resolve and
    share of edits by pack and block."""
    summary = session_summary(rows)
    figures = summary.figures
    by_attempt = figures["by_attempt"]
    rates = [
        (
            f"attempt {n}",
            c["accepted"] / c["attempts"],
            f"{100 * c['accepted'] / c['attempts']:.0f}% ({c['accepted']}/{c['attempts']})",
        )
        for n, c in by_attempt.items()
    ]
    accepted = [r for r in summary.runs.values() if r.final and r.action == "PROCEED"]
    per_accepted = f"{sum(r.attempts for r in accepted) / len(accepted):.2f}" if accepted else "-"
    return _render(
        "session.html.j2",
        title=title,
        summary=summary,
        figures=figures,
        packs=[[p, v, r, n] for (p, v, r), n in summary.packs.items()],
        when=[["first attempt", summary.first or "-"], ["last attempt", summary.last or "-"]],
        outcome_bars=[(a, n, str(n)) for a, n in figures["outcomes"].items()],
        per_run_rows=[[n, runs] for n, runs in figures["attempts_per_run"].items()],
        cost_rows=[
            ["repair and retry attempts", figures["repairs"]],
            ["runs accepted after a failure", figures["rescued"]],
            ["example tokens in repair prompts", figures["example_tokens"]],
        ],
        per_accepted=per_accepted,
        usage_rows=[
            [kind, u["attempts"], u["tokens_in"], u["tokens_out"], u["estimated"], _money(u)]
            for kind, u in figures.get("usage", {}).items()
        ],
        rates=rates,
        by_attempt_rows=[[n, c["attempts"], c["accepted"]] for n, c in by_attempt.items()],
        failure_bars=[(t, n, str(n)) for t, n in figures["failures"].items()],
        tier_rows=[
            [t, c.get("used", 0), c.get("succeeded", 0)] for t, c in figures["tiers"].items()
        ],
        review_rows=[_review_row(group) for group in (reviews or {}).get("by_block", [])],
    )


def _review_row(group: Mapping[str, Any]) -> list[Any]:
    """One pack and block of the review queue as a row of the session page."""
    done = group["resolved"]
    count = group["resolve_seconds_count"]
    return [
        f"{group['pack']} / {group['block']}",
        group["open"],
        int(group["oldest_age_seconds"]),
        done["approved"],
        done["edited"],
        done["rejected"],
        done["expired"],
        f"{group['resolve_seconds_sum'] / count:.1f}" if count else "-",
        f"{100 * group['edit_share']:.0f}%",
    ]


def _money(usage: Mapping[str, Any]) -> str:
    """A kind's cost as shown: six decimals (prices per million tokens make small sums)."""
    return f"{usage['cost']:.6f}"


def backtest(report: Mapping[str, Any], title: str = "Backtest") -> str:
    """The report of `rules backtest --format json` as a page, with the flip matrices."""
    summary = report["summary"]
    sides = [("pack", summary["pack"])]
    if "baseline" in summary:
        sides.insert(0, ("baseline", summary["baseline"]))
    statuses = sorted({k for _, s in sides for k in s["status"]})
    actions = sorted({k for _, s in sides for k in s["actions"]})
    totals_rows = [
        [
            f"{label}: {s['ref']}",
            *[s["status"].get(k, 0) for k in statuses],
            *[s["actions"].get(a, 0) for a in actions],
            s["further_attempts"],
        ]
        for label, s in sides
    ]
    matrices = None
    if "baseline" in summary:
        flips = report["flips"]
        matrices = [
            (
                name,
                ["baseline \\ pack", *[f"to {k}" for k in keys]],
                [
                    [f"from {a}", *[flips.get(f"{a}->{b}", 0) if a != b else "-" for b in keys]]
                    for a in keys
                ],
            )
            for name, keys in (("Verdict flips", statuses), ("Action flips", actions))
        ]
    examples = [
        (kind, e["where"], e["pack"]["error"] or e["baseline"]["error"] or "", deciding_rules(e))
        for kind, found in report["examples"].items()
        for e in found
    ]
    return _render(
        "backtest.html.j2",
        title=title,
        total=report["total"],
        totals_header=["pack", *statuses, *actions, "further attempts"],
        totals_rows=totals_rows,
        matrices=matrices,
        examples=examples,
        flipped_count=report.get("flipped"),
    )
