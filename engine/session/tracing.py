"""The spans of evaluations and runs (engine/core/telemetry.py; docs/telemetry.md).

``evaluation_span`` and ``run_span`` open them with what is known at the start (pack, block,
item, model); ``record_decision`` and ``record_run`` add what is known at the end. Every
route to an evaluation passes through one of them: ``Session.evaluate`` (a session attempt:
`rules eval --session`, `rules run`, the Python API) and ``evaluate_output`` without a
session (`rules eval`); ``run_loop`` is one run span around its attempts."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from engine.core import telemetry as t
from engine.core.verdict import Verdict
from engine.pack.loaded import Pack
from engine.policy.triggers.decide import Decision

if TYPE_CHECKING:
    from engine.session.loop import RunResult
    from engine.session.session import Outcome, Session

P = ParamSpec("P")


class _HasPack(Protocol):
    pack: Pack


S = TypeVar("S", bound=_HasPack)


def pack_attributes(pack: Pack) -> dict[str, t.Value | None]:
    """The pack's name, version and revision (a hash of its files, where packs have one)."""
    return {
        t.PACK_NAME: pack.name,
        t.PACK_VERSION: pack.model.version,
        t.PACK_REVISION: getattr(pack, "revision", None),
    }


def evaluation_span(
    pack: Pack, block: str, *, item: str | None = None, model: str | None = None
) -> AbstractContextManager[t.Span]:
    """The span of one output evaluated and decided for ``block``."""
    if not t.enabled():
        return t.NOTHING
    return t.span(
        "rules.evaluate",
        {
            **pack_attributes(pack),
            t.BLOCK: block,
            t.EVALUATION_NAME: f"{pack.name}/{block}",
            t.ITEM: item,
            t.REQUEST_MODEL: model,
        },
    )


def record_decision(span: t.Span, verdict: Verdict, decision: Decision) -> None:
    """The verdict and the decision on an evaluation's (or a run's) span."""
    if span is t.NO_SPAN:
        return
    span.set_attributes(
        {
            t.VERDICT_STATUS: verdict.status,
            t.EVALUATION_LABEL: verdict.status,
            t.FAILURE_TYPE: verdict.failure_type,
            t.ATTEMPT: decision.attempt,
            t.DECISION_ACTION: decision.action,
            t.DECISION_FINAL: decision.final,
        }
    )


def run_span(
    pack: Pack, block: str, *, item: str | None = None, model: str | None = None
) -> AbstractContextManager[t.Span]:
    """The span of one run of the loop: its attempts' evaluations are its children."""
    if not t.enabled():
        return t.NOTHING
    return t.span(
        "rules.run",
        {**pack_attributes(pack), t.BLOCK: block, t.ITEM: item, t.REQUEST_MODEL: model},
    )


def record_run(span: t.Span, result: RunResult) -> None:
    """A run's final verdict and decision, and how many attempts it made."""
    record_decision(span, result.verdict, result.decision)
    span.set_attributes({t.ATTEMPTS: len(result.attempts)})


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _call_inputs(args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[str, dict[str, Any]]:
    """The block (the first argument, or ``block=``), the item and the model of a call."""
    block = _text(args[0] if args else kwargs.get("block")) or ""
    return block, {"item": _text(kwargs.get("item")), "model": _text(kwargs.get("model"))}


def traced_evaluation(
    evaluate: Callable[Concatenate[Session, P], Outcome],
) -> Callable[Concatenate[Session, P], Outcome]:
    """``Session.evaluate`` inside an evaluation span (its signature unchanged)."""

    @functools.wraps(evaluate)
    def traced(session: Session, /, *args: P.args, **kwargs: P.kwargs) -> Outcome:
        if not t.enabled():
            return evaluate(session, *args, **kwargs)
        block, named = _call_inputs(args, kwargs)
        with evaluation_span(session.pack, block, **named) as span:
            outcome = evaluate(session, *args, **kwargs)
            record_decision(span, outcome.verdict, outcome.decision)
        return outcome

    return traced


def traced_run(
    run: Callable[Concatenate[S, P], RunResult],
) -> Callable[Concatenate[S, P], RunResult]:
    """``run_loop`` inside a run span (its signature unchanged)."""

    @functools.wraps(run)
    def traced(session: S, /, *args: P.args, **kwargs: P.kwargs) -> RunResult:
        if not t.enabled():
            return run(session, *args, **kwargs)
        block, named = _call_inputs(args, kwargs)
        with run_span(session.pack, block, **named) as span:
            result = run(session, *args, **kwargs)
            record_run(span, result)
        return result

    return traced
