"""What a session's page shows (engine.report.html), gathered from the ledger's attempt
rows: the figures of `rules log --format json` and the timelines drawn."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]

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
