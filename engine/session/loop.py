"""The repair/retry loop, written once: send a prompt, evaluate the output as the next attempt
of its item, decide, record, render the next prompt, until the pack's final decision.

How an output is obtained for a prompt is the caller's step: a model command
(``engine.session.runner``), a Python callable or a coroutine function
(``engine.session.calls``). ``attempts`` is the loop as a generator that yields each prompt
and receives the ``Execution`` it led to; ``drive`` and ``adrive`` feed it from a plain or an
async step. Every attempt is recorded (verdict and decision in one row, in one transaction)
before the next prompt is asked for, so an interrupted step leaves no half-recorded attempt.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Generator
from contextlib import closing
from dataclasses import asdict, dataclass, replace
from typing import Any

from engine.core.verdict import Verdict
from engine.pack.inputs import OutputInput
from engine.policy.triggers.decide import Decision
from engine.session.items import sha256
from engine.session.session import EXECUTION_FAILURE, Outcome, Session


@dataclass(frozen=True)
class Execution:
    """What one step gave for a prompt: the model's output, or why there is none."""

    output: str | bytes
    error: str | None  # why the step failed (an EXECUTION_FAILED attempt), None when it ran


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


def attempts(
    session: Session,
    given: OutputInput,
    *,
    prompt: str,
    progress: Callable[[Outcome], None] = lambda outcome: None,
) -> Generator[str, Execution, RunResult]:
    """The loop: yields each prompt, receives its ``Execution``, returns the ``RunResult``.

    ``given`` holds the loop's inputs: each execution's output and error replace its own.
    Each output is an attempt of one item: the one ``given.item`` names, else the pack's
    ``session.item`` parts; without a nonce and a name those parts and a fresh run id, so
    separate runs never share a count."""
    run = uuid.uuid4().hex if given.nonce is None and given.item is None else None
    done: list[Attempt] = []
    current = prompt
    while True:
        execution = yield current
        attempt = replace(
            given,
            output=execution.output,
            error=execution.error,
            failure_type=EXECUTION_FAILURE,
        )
        outcome = session.evaluate(attempt, run=run)
        progress(outcome)
        decision = outcome.decision
        done.append(Attempt(current, execution.output, outcome.verdict, decision))
        if decision.final:
            return RunResult(outcome.verdict, decision, tuple(done))
        if execution.error is None and decision.template is not None:
            rendered = session.render_prompt(
                outcome.verdict, decision, attempt, outcome.user_context
            )
            current = rendered.text
            session.ledger.note_prompt(
                outcome.attempt_id,
                {**asdict(rendered), "prompt_sha256": sha256(rendered.text)},
            )
        # an execution failure that the pack retries sends the same prompt again


def drive(loop: Generator[str, Execution, RunResult], step: Step) -> RunResult:
    """Run ``loop`` with ``step`` giving the output for each prompt."""
    with closing(loop):
        sent: str | RunResult = next(loop)
        while isinstance(sent, str):
            sent = _send(loop, step(sent))
        return sent


async def adrive(loop: Generator[str, Execution, RunResult], step: AsyncStep) -> RunResult:
    """``drive`` with an async step (the evaluation and the ledger stay synchronous: no
    await between an attempt's record and its prompt, so a cancellation falls between
    attempts)."""
    with closing(loop):
        sent: str | RunResult = next(loop)
        while isinstance(sent, str):
            sent = _send(loop, await step(sent))
        return sent


def _send(loop: Generator[str, Execution, RunResult], execution: Execution) -> str | RunResult:
    """The loop's next prompt after ``execution``, or its result when it is done."""
    try:
        return loop.send(execution)
    except StopIteration as stop:
        result: RunResult = stop.value
        return result
