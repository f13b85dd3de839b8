"""The evaluate and render use cases: one output prepared (capped at the output limit, its
inputs split and checked, a caller's mistakes refused), evaluated and decided, recorded in
a session's ledger when one is given, and the prompt or presentation its decision calls
for. `rules eval`, `rules render`, POST /v1/evaluate, /v1/render and
/v1/sessions/{session}/outputs all call ``evaluate`` or ``render``; each front door only
reads its input and words the result and the refusals (``InputRefused.said``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.errors import EngineError, ParamError
from engine.core.textio import MAX_OUTPUT_BYTES, too_large_message
from engine.pack.inputs import OutputInput
from engine.policy.calls.replies import NO_USAGE, Call, Usage
from engine.session.next_prompt import render_after
from engine.session.session_ref import SessionRef
from engine.session.tracing import evaluation_span, record_decision

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.ledger.store import Place
    from engine.pack.compiled import Pack
    from engine.policy.triggers.decide import Decision
    from engine.session.recording import Session

NOTHING_EVALUATED = "(a caller's input, not the model's: nothing was evaluated)"


class InputRefused(EngineError):
    """A caller's input refused before anything is evaluated, named as the fields of the
    request (``nonce``, ``vars.NAME``, ``attempt``, ``session``, ``keep_outputs``,
    ``item``). ``said`` words it as a front door does: CLI flags, request fields."""

    def __init__(self, template: str, fields: Sequence[str], **values: str) -> None:
        self.template = template
        self.fields = tuple(fields)
        self.values = values
        super().__init__(self.said(str))

    def said(self, name: Callable[[str], str]) -> str:
        """The refusal with each field as ``name`` calls it."""
        names = [name(field) for field in self.fields]
        return self.template.format(*names, fields=" and ".join(names), **self.values)


class MissingInputs(InputRefused):
    """Inputs a block needs from the caller (its nonce, its required params) not given."""

    def __init__(self, block: str, fields: Sequence[str]) -> None:
        super().__init__(
            "block {block} needs {fields} " + NOTHING_EVALUATED, fields, block=repr(block)
        )


class ContextRefused(EngineError):
    """The context or vars do not fit what the pack declares (the request's context)."""


@dataclass(frozen=True)
class EvaluationRequest:
    """One output to evaluate and what came with it. ``given.vars`` are the caller's
    strings (block params and context keys together: preparing splits them); ``more``: the
    reader stopped at ``cap`` bytes and there was more; ``cap``: the output limit the
    caller asked for (else the pack's, else the engine's). ``attempt`` and
    ``previous_errors`` count without a session; with ``session`` its ledger counts and
    records (``keep_outputs``: keep the output there; ``reuse_latest``: an output that is
    the item's latest recorded attempt is that attempt again, as `rules render` after
    `rules eval` wants; ``continue_run``: count the output in the item's latest run even
    when it ended, instead of starting a new run at attempt 1)."""

    given: OutputInput
    more: bool = False
    cap: int | None = None
    attempt: int | None = None
    previous_errors: tuple[str, ...] = ()
    session: SessionRef | None = None
    keep_outputs: bool = False
    reuse_latest: bool = False
    continue_run: bool = False
    usage: Usage = NO_USAGE
    """What the client reported of the call that gave the output (a session records it
    with the attempt, priced by the pack)."""


@dataclass(frozen=True)
class Evaluated:
    """One output evaluated and decided (recorded when a session was given)."""

    pack: Pack
    verdict: Verdict
    decision: Decision
    output: str | bytes
    variables: dict[str, str]
    context: dict[str, Any]
    attempt_id: int | None = None  # its row in the session's ledger
    user_context: str = ""
    """The user's text a choice added for the item's next prompt (`rules choose --text`)."""
    review: int | None = None
    """The review the decision opened in the session's ledger (``reviews:``), or None."""
    kind: str | None = None
    """Why the attempt's prompt was sent (first, repair, retry, transport_retry), when
    recorded in a session."""
    usage: Usage = NO_USAGE
    cost: float | None = None


@dataclass(frozen=True)
class Rendered:
    """What the decision on an output calls for: a prompt (with what rendering it warned
    about), a rate limit's presentation for the user, or neither (none is due)."""

    evaluated: Evaluated
    prompt: str | None
    presentation: str | None
    warnings: list[str]


def output_cap(pack: Pack, requested: int | None = None) -> int:
    """The largest output to read: ``requested`` (`--max-output-bytes`), else the pack's
    `limits.max_output_bytes`, else the engine's default."""
    return requested or pack.model.limits.max_output_bytes or MAX_OUTPUT_BYTES


def prepare(pack: Pack, request: EvaluationRequest) -> OutputInput:
    """The request's output and inputs as the pack takes them: the output capped (a bigger
    one is an OUTPUT_TOO_LARGE failure), vars split into block params and context, the
    caller's mistakes refused (``InputRefused``, ``ContextRefused``)."""
    given = request.given
    cap = output_cap(pack, request.cap)
    output, error, failure_type = given.output, given.error, given.failure_type
    if isinstance(output, str):
        output = output.encode("utf-8", "surrogatepass")
    if request.more or (output is not None and len(output) > cap):
        output = output[:cap] if output is not None else None
        error, failure_type = too_large_message(cap), "OUTPUT_TOO_LARGE"
    try:
        variables, context = pack.split_inputs(given.block, given.context, given.vars)
    except ParamError:
        raise  # names its field (vars.NAME), which each front door says in its own words
    except EngineError as exc:
        raise ContextRefused(str(exc)) from None
    missing = pack.missing_inputs(given.block, given.nonce, variables) if error is None else []
    if missing:
        raise MissingInputs(given.block, missing)
    if request.session is not None and request.attempt is not None:
        raise InputRefused(
            "{0} and {1} exclude each other: with a session the ledger counts attempts",
            ("attempt", "session"),
        )
    if request.session is None and request.keep_outputs:
        raise InputRefused(
            "{0} needs {1}: outputs are kept in its ledger", ("keep_outputs", "session")
        )
    if request.session is None and request.continue_run:
        raise InputRefused(
            "{0} needs {1}: its ledger holds the item's runs", ("continue_run", "session")
        )
    if request.session is None and given.item is not None:
        raise InputRefused(
            "{0} needs {1}: its ledger counts the item's attempts", ("item", "session")
        )
    return given.prepared(output, variables, context, error, failure_type)


def evaluate(pack: Pack, request: EvaluationRequest) -> Evaluated:
    """Prepare the request's output, evaluate it and decide the next action; with a
    session its ledger counts the attempt (of the item ``given.item`` names, else of the
    one the pack's ``session.item`` makes) and records it."""
    ready = prepare(pack, request)
    if request.session is None:
        return _alone(pack, ready, request)
    with _opened(pack, request.session, request.keep_outputs) as session:
        return _recorded(session, ready, request)


def render(
    pack: Pack,
    request: EvaluationRequest,
    *,
    presentation: bool = True,
    decided: Callable[[Evaluated], None] = lambda evaluated: None,
) -> Rendered:
    """``evaluate``, then what the decision calls for: the rate limit's presentation when
    one decided (unless ``presentation`` is false: the caller answers prompts only), else
    the prompt of its template, if any. With a session, what rendering warned about is
    recorded with the attempt. ``decided`` is called once the decision is made, before
    anything is rendered (a server counts it there)."""
    ready = prepare(pack, request)
    if request.session is None:
        evaluated = _alone(pack, ready, request)
        decided(evaluated)
        return _due(pack, ready, evaluated, None, presentation)
    with _opened(pack, request.session, request.keep_outputs) as session:
        evaluated = _recorded(session, ready, request)
        decided(evaluated)
        rendered = _due(pack, ready, evaluated, session.place, presentation)
        if rendered.warnings and evaluated.attempt_id is not None:
            session.ledger.note_prompt(evaluated.attempt_id, {"warnings": rendered.warnings})
    return rendered


def _opened(pack: Pack, ref: SessionRef, keep_outputs: bool) -> Session:
    """The session ``ref`` names, opened for ``pack``."""
    # Deferred: the session's module imports the ledger and SQLite, 25 ms (python -X
    # importtime) that an evaluation without a session does not need.
    from engine.session.recording import Session

    return Session(pack, ref, keep_outputs=keep_outputs)


def _alone(pack: Pack, ready: OutputInput, request: EvaluationRequest) -> Evaluated:
    """``ready`` evaluated and decided as attempt ``request.attempt``, recorded nowhere."""
    context = dict(ready.context)
    with evaluation_span(pack, ready.block, item=ready.item, model=ready.model) as span:
        verdict = ready.verdict(pack, context)
        decision = ready.decide(
            pack,
            verdict,
            context,
            attempt=request.attempt or 1,
            previous_errors=request.previous_errors,
        )
        record_decision(span, verdict, decision)
    return Evaluated(pack, verdict, decision, ready.output or b"", dict(ready.vars), context)


def _recorded(session: Session, ready: OutputInput, request: EvaluationRequest) -> Evaluated:
    """``ready`` evaluated, decided and recorded as the next attempt of its item (in its
    latest run with ``continue_run``), with the usage the client reported."""
    outcome = session.evaluate(
        ready,
        reuse_latest=request.reuse_latest,
        continue_run=request.continue_run,
        call=Call(request.usage),
    )
    return Evaluated(
        session.pack,
        outcome.verdict,
        outcome.decision,
        ready.output or b"",
        dict(ready.vars),
        dict(ready.context),
        outcome.attempt_id,
        outcome.user_context,
        outcome.review,
        outcome.kind,
        outcome.usage,
        outcome.cost,
    )


def _due(
    pack: Pack,
    ready: OutputInput,
    evaluated: Evaluated,
    place: Place | None,
    presentation: bool,
) -> Rendered:
    """What ``evaluated``'s decision calls for after ``ready`` (``place``: the session's,
    whose ledger keeps the outputs of tier-2 examples)."""
    verdict, decision = evaluated.verdict, evaluated.decision
    if presentation and decision.limit is not None and decision.limit.get("presentation"):
        return Rendered(evaluated, None, pack.present(verdict, decision, ready.context), [])
    if decision.template is None:
        return Rendered(evaluated, None, None, [])
    prompt = render_after(pack, verdict, decision, ready, evaluated.user_context, place)
    return Rendered(evaluated, prompt.text, None, list(prompt.warnings))
