"""What a session's page shows (engine.report.html), gathered from the ledger's attempt
rows: the figures of `rules log --format json`, the runs of each item and how they ended,
the packs and revisions that decided, and the timelines drawn."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.session.items import item_label

Row = Mapping[str, Any]

TIMELINE_ITEMS = 500
"""Runs a session page draws as timelines (the first ones); its figures count them all."""
TIMELINE_ATTEMPTS = 50
"""Attempts drawn per run (the first ones)."""

OPEN = "open"
"""How a run whose last attempt was not final is counted among the outcomes."""

RunKey = tuple[str, str, int]
"""(block, item, run): one run of one item."""


@dataclass
class RunSummary:
    """One run of an item: its name, when it started and last moved, its attempts and how
    it ended (its last attempt's action; ``final`` false: still open)."""

    block: str
    item: str
    run: int
    label: str
    started: str
    last: str
    attempts: int = 0
    action: str = ""
    final: bool = False
    failures: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return self.action if self.final else OPEN


@dataclass
class SessionSummary:
    """What a session page shows, gathered in one pass over the ledger's rows: memory
    grows with the runs, not the attempts, and the page draws a bounded number."""

    figures: dict[str, Any]
    """As `rules log --format json` counts them: attempts, items, runs, by_attempt,
    failures, tiers, outcomes (runs by final action, ``open`` for runs not ended),
    attempts_per_run (runs by their number of attempts), repairs (attempts after the
    first of a run: the repairs and retries), rescued (runs accepted after a failed
    attempt) and example_tokens (the tokens of the examples repair prompts carried); and
    when any attempt recorded tokens, usage: per kind of attempt (first, repair, retry,
    transport_retry) its attempts, tokens in and out, how many were estimated, and cost;
    and when any output was streamed, streams: how many, how many were closed early, the
    tokens those did not generate and how many of their counts are estimates."""
    timeline: dict[RunKey, list[Row]]
    hidden_attempts: Counter[RunKey]
    runs: dict[RunKey, RunSummary]
    packs: dict[tuple[str, str, str], int]
    """(pack, version, revision) → attempts it decided (``-`` where not recorded)."""
    first: str | None = None
    last: str | None = None


KINDS = ("first", "repair", "retry", "transport_retry")
"""Why an attempt's prompt was sent, in the order the figures show them (engine.policy.calls)."""


def _kind_order(kind: str) -> tuple[int, str]:
    return (KINDS.index(kind) if kind in KINDS else len(KINDS), kind)


def _count_usage(row: Row, usage: dict[str, Counter[str]], costs: dict[str, float]) -> None:
    """Add ``row``'s tokens and cost to its kind's (``-`` for rows recorded before kinds)."""
    kind = str(row.get("kind") or "-")
    counts = usage.setdefault(kind, Counter())
    counts["attempts"] += 1
    counts["tokens_in"] += int(row.get("tokens_in") or 0)
    counts["tokens_out"] += int(row.get("tokens_out") or 0)
    counts["estimated"] += bool(row.get("tokens_estimated"))
    cost = row.get("cost")
    costs[kind] = costs.get(kind, 0.0) + (float(cost) if cost is not None else 0.0)


def _count_stream(row: Row, streams: Counter[str]) -> None:
    """Add ``row``'s stream, if its output was streamed: closed early or not, and the
    tokens a stream closed early did not generate (how many of those counts are
    estimates)."""
    if row.get("streamed_chars") is None:
        return
    streams["streamed"] += 1
    streams["cut"] += bool(row.get("stream_cut"))
    left = row.get("tokens_not_generated")
    if left is not None:
        streams["tokens_not_generated"] += int(left)
        streams["estimated"] += bool(row.get("not_generated_estimated"))


def session_summary(rows: Iterable[Row]) -> SessionSummary:
    """The figures, runs and timelines of a session's attempt rows (oldest first). A tier
    succeeded when the next attempt of its item was accepted."""
    by_attempt: dict[int, Counter[str]] = {}
    failures: Counter[str] = Counter()
    tiers: dict[str, Counter[str]] = {}
    pending_tier: dict[tuple[str, str], str | None] = {}  # every item seen: its last tier
    timeline: dict[RunKey, list[Row]] = {}
    hidden: Counter[RunKey] = Counter()
    runs: dict[RunKey, RunSummary] = {}
    packs: Counter[tuple[str, str, str]] = Counter()
    first: str | None = None
    last: str | None = None
    attempts = 0
    example_tokens = 0
    usage: dict[str, Counter[str]] = {}
    costs: dict[str, float] = {}
    streams: Counter[str] = Counter()
    for row in rows:
        attempts += 1
        _count_usage(row, usage, costs)
        _count_stream(row, streams)
        key = (str(row["block"]), str(row["item"]))
        run_key = (*key, int(row.get("run") or 1))
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
        example_tokens += int(row.get("example_tokens") or 0)
        ts = str(row.get("ts") or "")
        first = first or ts or None
        last = ts or last
        version, revision = row.get("pack_version") or "-", row.get("revision") or "-"
        packs[(str(row.get("pack") or "-"), str(version), str(revision))] += 1
        run = runs.get(run_key)
        if run is None:
            run = runs[run_key] = RunSummary(*run_key, item_label(key[1]), ts, ts)
        run.attempts += 1
        run.last = ts
        run.action = str(row["action"])
        run.final = bool(row.get("final", True))
        if row["failure_type"]:
            run.failures.append(str(row["failure_type"]))
        shown = timeline.get(run_key)
        if shown is None and len(runs) <= TIMELINE_ITEMS:  # among the first runs
            shown = timeline[run_key] = []
        if shown is not None and len(shown) < TIMELINE_ATTEMPTS:
            shown.append(row)
        elif shown is not None:
            hidden[run_key] += 1
    outcomes = Counter(run.outcome for run in runs.values())
    figures = {
        "attempts": attempts,
        "items": len(pending_tier),
        "runs": len(runs),
        "by_attempt": {n: dict(c) for n, c in sorted(by_attempt.items())},
        "failures": dict(failures.most_common()),
        "tiers": {t: {"used": 0, "succeeded": 0, **c} for t, c in sorted(tiers.items())},
        "outcomes": dict(sorted(outcomes.items(), key=lambda pair: (-pair[1], pair[0]))),
        "attempts_per_run": dict(sorted(Counter(r.attempts for r in runs.values()).items())),
        "repairs": attempts - len(runs),
        "rescued": sum(
            1 for r in runs.values() if r.final and r.action == "PROCEED" and r.failures
        ),
        "example_tokens": example_tokens,
    }
    if any(counts["tokens_in"] or counts["tokens_out"] for counts in usage.values()):
        figures["usage"] = {
            kind: {
                "attempts": counts["attempts"],
                "tokens_in": counts["tokens_in"],
                "tokens_out": counts["tokens_out"],
                "estimated": counts["estimated"],
                "cost": costs.get(kind, 0.0),
            }
            for kind, counts in sorted(usage.items(), key=lambda pair: _kind_order(pair[0]))
        }
    if streams:
        figures["streams"] = {
            "streamed": streams["streamed"],
            "cut": streams["cut"],
            "tokens_not_generated": streams["tokens_not_generated"],
            "estimated": streams["estimated"],
        }
    return SessionSummary(figures, timeline, hidden, runs, dict(packs), first, last)
