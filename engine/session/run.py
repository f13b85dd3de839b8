"""The run use case: the repair/retry loop, written once. Send a prompt, evaluate the output
as the next attempt of its item, decide, record, render the next prompt, until the pack's
final decision.

How an output is obtained for a prompt is the caller's step: a model command
(``engine.session.command``: `rules run`), a Python callable or a coroutine function
(``engine.session.callable``: ``engine.run``, ``engine.arun``). ``run_with`` and
``arun_with`` start a run (``RunRequest``: its inputs split and checked, its session opened,
its first prompt) and feed it from a plain or an async step. ``attempts`` is the loop as a
generator that yields each prompt (``Ask``: the prompt and the wait before it) and receives
the ``Execution`` it led to. Every attempt is recorded (verdict and decision in one row, in
one transaction) before the next prompt is asked for, so an interrupted step leaves no
half-recorded attempt.

A failed call is classified here, for every step alike, by the pack's ``model_calls``
(``engine.policy.calls``); a declared transport retry asks for the same prompt again after
its backoff, which the driver waits out (``drive`` with ``Waits.sleep``, ``adrive`` without
holding the event loop). Each attempt's usage, reported or estimated, is recorded with it.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from engine.core.verdict import Verdict
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.policy.calls.replies import NO_USAGE, Call, Usage, estimated
from engine.policy.calls.runtime import EXECUTION_FAILED, CallFailure, CompiledCalls
from engine.policy.triggers.decide import Decision
from engine.session.evaluation import InputRefused
from engine.session.items import sha256
from engine.session.recording import Outcome, Session
from engine.session.review import ReviewState, Shown, resumed, wait_for
from engine.session.session_ref import DEFAULT_SESSION, SessionRef
from engine.session.stream import StreamEnd, not_generated
from engine.session.tracing import record_run, run_span


@dataclass(frozen=True)
class Execution:
    """What one step gave for a prompt: the model's output, or why there is none."""

    output: str | bytes
    error: str | None  # why the step failed (an EXECUTION_FAILED attempt), None when it ran
    stderr: str | None = None
    """The tail of a model command's stderr (bounded, secrets scrubbed): recorded with the
    attempt and shown to the operator, never put in a prompt."""
    failure: CallFailure | None = None
    """What is known of a failed call (its exception, exit status, stderr, Retry-After),
    which the pack's ``model_calls`` classify; None: the call did not fail, or nothing
    is known that a rule reads (EXECUTION_FAILED)."""
    usage: Usage = NO_USAGE
    """The tokens the client or the command reported; what is missing is estimated."""
    stream: StreamEnd | None = None
    """Where a streamed output stopped (``engine.session.stream``); None: not streamed. A
    stream cut at a definite failure has that failure as its verdict."""
    shared: dict[str, Any] | None = None
    """What the stream's prefix reader already read of the output, which its evaluation
    reuses (``EvaluationInput.shared``)."""


@dataclass(frozen=True)
class Ask:
    """What the loop asks of its step: send ``prompt``, after waiting ``wait`` seconds (a
    transport retry's backoff)."""

    prompt: str
    wait: float = 0.0


@dataclass(frozen=True)
class Waits:
    """How the loop waits before a transport retry, and the random draw of its jitter:
    the real clock by default, a controlled one in tests."""

    sleep: Callable[[float], None] = time.sleep
    random: Callable[[], float] = random.random


REAL_WAITS = Waits()


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run: the prompt sent, the output it got, its verdict and decision."""

    prompt: str
    output: str | bytes
    verdict: Verdict
    decision: Decision


@dataclass(frozen=True)
class RunResult:
    """The end of a run: the final verdict and decision, the data to continue with, and
    every attempt in order."""

    verdict: Verdict
    decision: Decision
    attempts: tuple[Attempt, ...]
    review: ReviewState | None = None
    """The review the final decision opened (the pack's ``reviews.actions``): its id and
    state. Once a person resolved it (within the run's wait), ``verdict`` and ``decision``
    are the resolution's: an edited output's verdict, PROCEED, or the pack's action."""

    @property
    def output(self) -> str | bytes:
        """The last attempt's output."""
        return self.attempts[-1].output

    @property
    def data(self) -> Any:
        """The accepted data, or the pack's degraded default; None after a final failure
        without a default (as `rules run` prints)."""
        if self.decision.exit_code == 0 and self.verdict.data is not None:
            return self.verdict.data
        return self.decision.default


Step = Callable[[str], Execution]
AsyncStep = Callable[[str], Awaitable[Execution]]
Progress = Callable[[Outcome], None]


def no_progress(outcome: Outcome) -> None:
    """The progress of a run no one watches: each attempt's outcome is not shown."""


@dataclass(frozen=True)
class RunRequest:
    """A run to start: its block, its first prompt (None: the pack's first prompt for the
    block), the block's nonce, the caller's ``vars`` (block params and context strings
    together), the context, the model's name, the item its attempts are counted under,
    and the session that records them (``keep_outputs``: keep the outputs there).
    ``continue_run``: the first output continues the item's latest run even when it ended
    (its count and caps go on) instead of starting a new run at attempt 1."""

    block: str
    prompt: str | None = None
    nonce: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    item: str | None = None
    session: SessionRef = field(default_factory=lambda: SessionRef(DEFAULT_SESSION))
    keep_outputs: bool = False
    continue_run: bool = False
    review_wait: float | None = None
    """Seconds to wait for a review the final decision opens to be resolved (None: the
    pack's ``reviews.wait``; 0: return at once with the review's id)."""


class NoFirstPrompt(InputRefused):
    """The run has no first prompt: the caller gave none and the pack declares none."""

    def __init__(self, pack: str, block: str) -> None:
        super().__init__(
            "pack {pack} declares no first prompt for block {block}: pass {0} (or declare "
            "one in the pack's `prompts:` section)",
            ("prompt",),
            pack=repr(pack),
            block=repr(block),
        )


class NoItemToContinue(InputRefused):
    """A run asked to continue an item's run without naming the item: without a nonce
    and an item name each run is an item of its own, so there is nothing to continue."""

    def __init__(self) -> None:
        super().__init__(
            "{0} continues an item's latest run: name the item with {1} or {2} (without "
            "them each run is an item of its own)",
            ("continue_run", "item", "nonce"),
        )


@dataclass(frozen=True)
class Run:
    """A started run: its session, its inputs, its first prompt and whether it continues
    the item's latest run."""

    session: Session
    given: OutputInput
    prompt: str
    continue_run: bool = False

    def attempts(
        self, progress: Progress, waits: Waits = REAL_WAITS
    ) -> Generator[Ask, Execution, RunResult]:
        return attempts(
            self.session,
            self.given,
            prompt=self.prompt,
            progress=progress,
            continue_run=self.continue_run,
            draw=waits.random,
        )


@contextmanager
def started(pack: Pack, request: RunRequest) -> Iterator[Run]:
    """The run ``request`` asks for: its vars split into params and context (EngineError
    when they do not fit the pack), its first prompt checked (``NoFirstPrompt``), its
    session opened (and closed after)."""
    block = request.block
    params, context = pack.split_inputs(block, request.context, request.vars)
    if request.prompt is None and block not in pack.model.prompts:
        raise NoFirstPrompt(pack.name, block)
    if request.continue_run and request.nonce is None and request.item is None:
        raise NoItemToContinue()
    with Session(pack, request.session, keep_outputs=request.keep_outputs) as session:
        prompt = request.prompt
        if prompt is None:
            prompt = _initial(pack, block, params, context, request.nonce, session)
        prompt_key = pack.model.session.prompt
        if prompt and prompt_key:  # the pack's own first prompt too: repairs carry the task
            context.setdefault(prompt_key, prompt)
        given = OutputInput(
            block,
            nonce=request.nonce,
            vars=params,
            context=context,
            model=request.model,
            item=request.item,
        )
        yield Run(session, given, prompt, request.continue_run)


@dataclass(frozen=True)
class PromptRequest:
    """A block's first prompt to render (`rules prompt`): its nonce, the caller's ``vars``
    (block params and context strings together), the context, and the session whose
    resolved conflicts fill the pack's ``session.decided`` key, if any."""

    block: str
    nonce: str | None = None
    vars: Mapping[str, str] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)
    session: SessionRef | None = None


def first_prompt(pack: Pack, request: PromptRequest) -> str:
    """The pack's first prompt for the block (its `prompts:` template), as a run sends
    it."""
    params, context = pack.split_inputs(request.block, request.context, request.vars)
    if request.session is None:
        return _initial(pack, request.block, params, context, request.nonce, None)
    with Session(pack, request.session) as session:
        return _initial(pack, request.block, params, context, request.nonce, session)


def _initial(
    pack: Pack,
    block: str,
    params: dict[str, str],
    context: dict[str, Any],
    nonce: str | None,
    session: Session | None,
) -> str:
    """The first prompt, with the session's decisions in its context when there is one."""
    decided = session.with_decisions(context) if session is not None else context
    return str(pack.initial_prompt(block, vars=params, context=decided, nonce=nonce))


def run_with(
    pack: Pack,
    request: RunRequest,
    step: Step,
    progress: Progress = no_progress,
    waits: Waits = REAL_WAITS,
) -> RunResult:
    """Run ``request`` with ``step`` giving the output for each prompt, in a run span;
    ``waits`` sleeps before a transport retry."""
    with started(pack, request) as run, _span(pack, request) as span:
        result = drive(run.attempts(progress, waits), step, waits.sleep)
        record_run(span, result)
    return awaited_review(pack, request, result)


async def arun_with(
    pack: Pack,
    request: RunRequest,
    step: AsyncStep,
    sleep: Callable[[float], Awaitable[None]],
    waits: Waits = REAL_WAITS,
) -> RunResult:
    """``run_with`` with an async step; ``sleep`` waits before a transport retry without
    holding the event loop (a wait for a review runs in a worker thread)."""
    with started(pack, request) as run, _span(pack, request) as span:
        result = await adrive(run.attempts(no_progress, waits), step, sleep)
        record_run(span, result)
    if result.review is None:
        return result
    return await asyncio.to_thread(awaited_review, pack, request, result)


def awaited_review(pack: Pack, request: RunRequest, result: RunResult) -> RunResult:
    """``result``, or once the review its final decision opened is resolved within the
    run's wait (``request.review_wait``, else the pack's ``reviews.wait``), the
    resolution's verdict and decision."""
    if result.review is None:
        return result
    seconds = request.review_wait
    if seconds is None:
        seconds = float(pack.model.reviews.wait)
    if seconds <= 0:
        return result
    found = wait_for(request.session, result.review.id, seconds)
    state = ReviewState.of(found)
    if state.state != "resolved":
        return replace(result, review=state)
    verdict, decision = resumed(pack, found, result.verdict, result.decision)
    return replace(result, verdict=verdict, decision=decision, review=state)


def _span(pack: Pack, request: RunRequest) -> Any:
    return run_span(pack, request.block, item=request.item, model=request.model)


def attempts(
    session: Session,
    given: OutputInput,
    *,
    prompt: str,
    progress: Progress = no_progress,
    continue_run: bool = False,
    draw: Callable[[], float] = REAL_WAITS.random,
) -> Generator[Ask, Execution, RunResult]:
    """The loop: yields each prompt to send (``Ask``), receives its ``Execution``, returns
    the ``RunResult``.

    ``given`` holds the loop's inputs: each execution's output and error replace its own.
    Each output is an attempt of one item: the one ``given.item`` names, else the pack's
    ``session.item`` parts; without a nonce and a name those parts and a fresh run id, so
    separate runs never share a count. The run starts a new run of the item (numbered from
    1) unless ``continue_run`` continues its latest one.

    A failed call is classified by the pack's ``model_calls``; when its transport retry
    takes the failure type, the attempt is recorded as a transport retry (it spends no
    repair) and the same prompt is asked for again after the backoff (``draw``: the
    random part of its jitter)."""
    run = uuid.uuid4().hex if given.nonce is None and given.item is None else None
    calls: CompiledCalls = session.pack.section("model_calls")
    declared = session.pack.model.failure_types
    done: list[Attempt] = []
    current = prompt
    # the first call is paid for by the pack's budgets before it is made, or not made
    refused = session.admit_call(given.block)
    if refused is not None:
        attempt = replace(
            given,
            output="",
            error=f"model not called: {refused.reason}",
            failure_type=EXECUTION_FAILED,
        )
        outcome = session.evaluate(attempt, run=run, continue_run=continue_run, refused=refused)
        progress(outcome)
        verdict, decision = outcome.verdict, outcome.decision
        return RunResult(verdict, decision, (Attempt(current, "", verdict, decision),))
    admitted = True
    wait = 0.0
    retried = 0  # transport retries of the current prompt
    while True:
        execution = yield Ask(current, wait)
        # a stream closed at its first definite failure is that failure, not a failed call
        cut = execution.stream.failure if execution.stream is not None else None
        failure_type = calls.classify(execution.failure, declared) if cut is None else cut.type
        attempt = replace(
            given,
            output=execution.output,
            error=execution.error if cut is None else cut.message,
            failure_type=failure_type,
            shared=execution.shared,
        )
        delay = None
        if execution.error is not None:
            asked = execution.failure.retry_after if execution.failure else None
            delay = calls.delay(failure_type, retried, asked, draw)
        usage = execution.usage
        if execution.error is None or usage.known:
            text = execution.output if isinstance(execution.output, str) else ""
            if isinstance(execution.output, bytes):
                text = execution.output.decode("utf-8", "replace")
            usage = estimated(usage, current, text, calls.chars_per_token)
        call = Call(usage, delay, retried)
        stream = execution.stream
        if stream is not None and stream.cut:  # what the closed stream did not generate
            reported = execution.usage.tokens_out  # None: not reported, counted from chars
            stream = not_generated(stream, reported, calls.chars_per_token)
        outcome = session.evaluate(
            attempt,
            run=run,
            continue_run=continue_run,
            stderr=execution.stderr,
            prompt=current,
            transcript=[Shown(a.prompt, a.output, a.verdict) for a in done],
            admitted=admitted,
            stream=stream,
            call=call,
        )
        admitted = False
        progress(outcome)
        decision = outcome.decision
        done.append(Attempt(current, execution.output, outcome.verdict, decision))
        if decision.final:
            review = None
            if outcome.review is not None:
                review = ReviewState(outcome.review, "open", session.place.label)
            return RunResult(outcome.verdict, decision, tuple(done), review)
        wait, retried = 0.0, 0
        if delay is not None:  # the same prompt again, after the backoff
            wait, retried = delay, call.retried + 1
        elif execution.error is None and decision.template is not None:
            rendered = session.render_prompt(
                outcome.verdict, decision, attempt, outcome.user_context
            )
            current = rendered.text
            session.ledger.note_prompt(
                outcome.attempt_id,
                {**asdict(rendered), "prompt_sha256": sha256(rendered.text)},
            )
        # an execution failure that the pack retries sends the same prompt again


def drive(
    loop: Generator[Ask, Execution, RunResult],
    step: Step,
    sleep: Callable[[float], None] = time.sleep,
) -> RunResult:
    """Run ``loop`` with ``step`` giving the output for each prompt (``sleep`` waits
    before a transport retry)."""
    with closing(loop):
        sent = _first(loop)
        while isinstance(sent, Ask):
            if sent.wait > 0:
                sleep(sent.wait)
            sent = _send(loop, step(sent.prompt))
        return sent


async def adrive(
    loop: Generator[Ask, Execution, RunResult],
    step: AsyncStep,
    sleep: Callable[[float], Awaitable[None]],
) -> RunResult:
    """``drive`` with an async step (the evaluation and the ledger stay synchronous: no
    await between an attempt's record and its prompt, so a cancellation falls between
    attempts)."""
    with closing(loop):
        sent = _first(loop)
        while isinstance(sent, Ask):
            if sent.wait > 0:
                await sleep(sent.wait)
            sent = _send(loop, await step(sent.prompt))
        return sent


def _first(loop: Generator[Ask, Execution, RunResult]) -> Ask | RunResult:
    """The loop's first prompt, or its result when it ends before any call (a budget
    refused the first)."""
    try:
        return next(loop)
    except StopIteration as stop:
        result: RunResult = stop.value
        return result


def _send(loop: Generator[Ask, Execution, RunResult], execution: Execution) -> Ask | RunResult:
    """The loop's next prompt after ``execution``, or its result when it is done."""
    try:
        return loop.send(execution)
    except StopIteration as stop:
        result: RunResult = stop.value
        return result
