"""Prometheus metrics: decisions by pack, block and action; failures by type; model tokens
and cost by kind of attempt (first, repair, retry, transport_retry: repairs and transport
retries apart); request latency; ledger errors.

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
from engine.policy.calls.replies import Usage
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
MODEL_TOKENS = Counter(
    "rules_model_tokens_total",
    "Model tokens of recorded attempts, by pack, block, kind of attempt (first, repair, "
    "retry, transport_retry), direction (in, out) and whether they were estimated",
    ["pack", "block", "kind", "direction", "estimated"],
)
MODEL_COST = Counter(
    "rules_model_cost_total",
    "Cost of recorded attempts at their pack's prices, by pack, block and kind of attempt",
    ["pack", "block", "kind"],
)
REQUESTS = Histogram(
    "rules_request_seconds",
    "Request latency in seconds, by route, method and status",
    ["route", "method", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
LEDGER_ERRORS = Counter("rules_ledger_errors_total", "Ledger errors (answered 503)")
RELOADS = Counter("rules_reloads_total", "Pack reloads, by result", ["result"])


def count_decision(pack: str, verdict: Verdict, decision: Decision) -> None:
    DECISIONS.labels(pack, verdict.block, decision.action).inc()
    if verdict.status == "fail":
        FAILURES.labels(pack, verdict.block, verdict.failure_type or "unknown").inc()


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
