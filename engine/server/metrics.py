"""Prometheus metrics: decisions by pack, block and action; failures by type; model tokens
and cost by kind of attempt (first, repair, retry, transport_retry: repairs and transport
retries apart); request latency; ledger errors; the review queue (depth and age by pack
and block, resolutions, time to resolve, share of edits) and the circuit breakers' states,
read from the ledger when scraped.

With ``--workers N`` the command sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers
start, and ``/metrics`` sums every worker's values (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric

from engine.core.verdict import Verdict
from engine.policy.calls.replies import Usage
from engine.policy.triggers.decide import Decision

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


def _per_block(name: str, documentation: str, label: str) -> Counter:
    """A counter cut by pack, block and one more ``label``: how decisions, failures, costs
    and refusals are counted."""
    return Counter(name, documentation, ["pack", "block", label])


DECISIONS = _per_block(
    "rules_decisions_total", "Decisions made, by pack, block and action", "action"
)
FAILURES = _per_block(
    "rules_failures_total", "Failed verdicts, by pack, block and failure type", "failure_type"
)
MODEL_TOKENS = Counter(
    "rules_model_tokens_total",
    "Model tokens of recorded attempts, by pack, block, kind of attempt (first, repair, "
    "retry, transport_retry), direction (in, out) and whether they were estimated",
    ["pack", "block", "kind", "direction", "estimated"],
)
MODEL_COST = _per_block(
    "rules_model_cost_total",
    "Cost of recorded attempts at their pack's prices, by pack, block and kind of attempt",
    "kind",
)
REQUESTS = Histogram(
    "rules_request_seconds",
    "Request latency in seconds, by route, method and status",
    ["route", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
SPENDING = _per_block(
    "rules_spending_refusals_total",
    "Calls a budget could not pay for or a breaker skipped, by pack, block and rule "
    "(budget:NAME, breaker:NAME)",
    "rule",
)
LEDGER_ERRORS = Counter("rules_ledger_errors_total", "Ledger errors (answered 503)")
RELOADS = Counter("rules_reloads_total", "Pack reloads, by result", ["result"])


def count_decision(pack: str, verdict: Verdict, decision: Decision) -> None:
    DECISIONS.labels(pack, verdict.block, decision.action).inc()
    if decision.rule.startswith(("budget:", "breaker:")):
        SPENDING.labels(pack, verdict.block, decision.rule).inc()
    if verdict.status == "fail":
        FAILURES.labels(pack, verdict.block, verdict.failure_type or "unknown").inc()


class ReviewQueue:
    """The review queue's figures as gauges, read from the ledger when scraped (every
    worker shares the ledger, so one worker's reading is the fleet's)."""

    def __init__(self, figures: dict[str, Any]) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        labels = ["pack", "block"]
        depth = GaugeMetricFamily("rules_reviews_open", "Open reviews (queue depth)", labels=labels)
        age = GaugeMetricFamily(
            "rules_reviews_oldest_age_seconds", "Age of the oldest open review", labels=labels
        )
        resolved = GaugeMetricFamily(
            "rules_reviews_resolved",
            "Resolved reviews, by resolution",
            labels=[*labels, "resolution"],
        )
        spent = GaugeMetricFamily(
            "rules_reviews_resolve_seconds_sum",
            "Seconds from opening to resolution, summed",
            labels=labels,
        )
        count = GaugeMetricFamily(
            "rules_reviews_resolve_seconds_count", "Reviews resolved by a person", labels=labels
        )
        edits = GaugeMetricFamily(
            "rules_reviews_edit_share",
            "Share of a person's resolutions that were edits",
            labels=labels,
        )
        for group in self.figures.get("by_block", []):
            key = [group["pack"], group["block"]]
            depth.add_metric(key, group["open"])
            age.add_metric(key, group["oldest_age_seconds"])
            for kind, n in group["resolved"].items():
                resolved.add_metric([*key, kind], n)
            spent.add_metric(key, group["resolve_seconds_sum"])
            count.add_metric(key, group["resolve_seconds_count"])
            edits.add_metric(key, group["edit_share"])
        yield from (depth, age, resolved, spent, count, edits)


def review_exposition(figures: dict[str, Any]) -> bytes:
    """The review queue's gauges in Prometheus text format."""
    registry = CollectorRegistry()
    registry.register(ReviewQueue(figures))
    return generate_latest(registry)


class Breakers:
    """The circuit breakers' states as gauges, read from the ledger when scraped: how many
    of the server's ledgers hold each breaker in each state (with a shared ledger: 1 for
    the state it is in)."""

    def __init__(self, gauges: dict[tuple[str, str, str], int]) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "rules_breaker_state",
            "Circuit breakers by pack, breaker and state (closed, open, half_open): the "
            "ledgers holding the breaker in that state",
            labels=["pack", "breaker", "state"],
        )
        for (pack, breaker, name), count in sorted(self.gauges.items()):
            state.add_metric([pack, breaker, name], count)
        yield state


def breaker_exposition(gauges: dict[tuple[str, str, str], int]) -> bytes:
    """The breakers' gauges in Prometheus text format."""
    registry = CollectorRegistry()
    registry.register(Breakers(gauges))
    return generate_latest(registry)


def count_usage(pack: str, block: str, kind: str | None, usage: Usage, cost: float | None) -> None:
    """Count a recorded attempt's tokens and cost under its kind."""
    shown = kind or "unknown"
    estimated = "true" if usage.estimated else "false"
    for direction, tokens in (("in", usage.tokens_in), ("out", usage.tokens_out)):
        if tokens:
            MODEL_TOKENS.labels(pack, block, shown, direction, estimated).inc(tokens)
    if cost:
        MODEL_COST.labels(pack, block, shown).inc(cost)


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus text format (every worker's, in multiprocess mode)."""
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
