"""The spans of evaluations and runs (engine/core/telemetry.py; docs/telemetry.md).

``evaluation_span`` and ``run_span`` open them with what is known at the start (pack, block,
item, model); ``record_decision`` and ``record_run`` add what is known at the end. Every
route to an evaluation passes through one of them: ``Session.evaluate`` (a session attempt:
`rules eval --session`, `rules run`, the Python API) and ``evaluate`` without a session
(`rules eval`); a run (``engine.session.run``) is one run span around its attempts."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from engine.core import telemetry as t
from engine.pack.inputs import OutputInput

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack
    from engine.policy.triggers.decide import Decision

P = ParamSpec("P")


class _HasPack(Protocol):
    pack: Pack


class _Decided(Protocol):
    """An evaluation's outcome, or a run's result: what its span records (the modules
    that define them import this one, never the other way round)."""

    @property
    def verdict(self) -> Verdict: ...

    @property
    def decision(self) -> Decision: ...


class _Ran(_Decided, Protocol):
    @property
    def attempts(self) -> tuple[object, ...]: ...


S = TypeVar("S", bound=_HasPack)
D = TypeVar("D", bound=_Decided)


def pack_attributes(pack: Pack) -> dict[str, t.Value | None]:
    """The pack's name, version and revision (a hash of its files, where packs have one)."""
    return {
        t.PACK_NAME: pack.name,
        t.PACK_VERSION: pack.model.version,
        t.PACK_REVISION: getattr(pack, "revision", None),
    }


def _span(
    name: str,
    pack: Pack,
    block: str,
    item: str | None,
    model: str | None,
    evaluation: str | None = None,
) -> AbstractContextManager[t.Span]:
    """The span ``name`` of ``block`` of ``pack`` (with its ``evaluation`` name, where it
    has one), or nothing when telemetry is off."""
    if not t.enabled():
        return t.NOTHING
    named = {t.EVALUATION_NAME: evaluation} if evaluation is not None else {}
    return t.span(
        name,
        {**pack_attributes(pack), t.BLOCK: block, **named, t.ITEM: item, t.REQUEST_MODEL: model},
    )


def evaluation_span(
    pack: Pack, block: str, *, item: str | None = None, model: str | None = None
) -> AbstractContextManager[t.Span]:
    """The span of one output evaluated and decided for ``block``."""
    return _span("rules.evaluate", pack, block, item, model, f"{pack.name}/{block}")


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
    return _span("rules.run", pack, block, item, model)


def record_usage(span: t.Span, outcome: object) -> None:
    """A recorded attempt's kind, tokens (``gen_ai.usage.*``), whether they were
    estimated, and cost, when known."""
    usage = getattr(outcome, "usage", None)
    attributes: dict[str, t.Value | None] = {t.ATTEMPT_KIND: getattr(outcome, "kind", None)}
    if usage is not None and usage.known:
        attributes.update(
            {
                t.INPUT_TOKENS: usage.tokens_in,
                t.OUTPUT_TOKENS: usage.tokens_out,
                t.TOKENS_ESTIMATED: usage.estimated,
                t.RESPONSE_MODEL: usage.model,
                t.COST: getattr(outcome, "cost", None),
            }
        )
    span.set_attributes(attributes)


def record_run(span: t.Span, result: _Ran) -> None:
    """A run's final verdict and decision, and how many attempts it made."""
    record_decision(span, result.verdict, result.decision)
    span.set_attributes({t.ATTEMPTS: len(result.attempts)})


def _call_inputs(args: tuple[object, ...], kwargs: dict[str, object]) -> tuple[str, dict[str, Any]]:
    """The block, the item and the model of a call's inputs (its first argument, or
    ``given=``)."""
    given = args[0] if args else kwargs.get("given")
    if not isinstance(given, OutputInput):
        return "", {"item": None, "model": None}
    return given.block, {"item": given.item, "model": given.model}


def traced_evaluation(
    evaluate: Callable[Concatenate[S, P], D],
) -> Callable[Concatenate[S, P], D]:
    """``Session.evaluate`` inside an evaluation span, with the outcome's verdict and
    decision recorded on it (its signature unchanged)."""

    @functools.wraps(evaluate)
    def traced(session: S, /, *args: P.args, **kwargs: P.kwargs) -> D:
        if not t.enabled():
            return evaluate(session, *args, **kwargs)
        block, named = _call_inputs(args, kwargs)
        with evaluation_span(session.pack, block, **named) as span:
            outcome = evaluate(session, *args, **kwargs)
            record_decision(span, outcome.verdict, outcome.decision)
            record_usage(span, outcome)
        return outcome

    return traced
