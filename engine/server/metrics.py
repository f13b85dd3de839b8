"""Prometheus metrics: decisions by pack, block and action; failures by type; request
latency; ledger errors.

With ``--workers N`` the command sets ``PROMETHEUS_MULTIPROC_DIR`` before the workers
start, and ``/metrics`` sums every worker's values (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as prometheus_multiprocess

from engine.core.verdict import Verdict
from engine.policy.triggers.decide import Decision

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

DECISIONS = Counter(
    "rules_decisions_total",
    "Decisions made, by pack, block and action",
    ["pack", "block", "action"],
)
FAILURES = Counter(
    "rules_failures_total",
    "Failed verdicts, by pack, block and failure type",
    ["pack", "block", "failure_type"],
)
REQUESTS = Histogram(
    "rules_request_seconds",
    "Request latency in seconds, by route, method and status",
    ["route", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
SPENDING = Counter(
    "rules_spending_refusals_total",
    "Calls a budget could not pay for or a breaker skipped, by pack, block and rule "
    "(budget:NAME, breaker:NAME)",
    ["pack", "block", "rule"],
)
LEDGER_ERRORS = Counter("rules_ledger_errors_total", "Ledger errors (answered 503)")
RELOADS = Counter("rules_reloads_total", "Pack reloads, by result", ["result"])


def count_decision(pack: str, verdict: Verdict, decision: Decision) -> None:
    DECISIONS.labels(pack, verdict.block, decision.action).inc()
    if decision.rule.startswith(("budget:", "breaker:")):
        SPENDING.labels(pack, verdict.block, decision.rule).inc()
    if verdict.status == "fail":
        FAILURES.labels(pack, verdict.block, verdict.failure_type or "unknown").inc()


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus text format (every worker's, in multiprocess mode)."""
    if os.environ.get(MULTIPROCESS_ENV):
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
