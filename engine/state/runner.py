"""Driving the loop around a model command: prompt on stdin, evaluate its stdout, repair or
retry per the pack until PROCEED or the after-failure policy; every attempt is recorded.

A command that crashes, exits non-zero or times out is an execution failure (its own
failure type), never a parse error, and its stderr never goes into a prompt.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from engine.policy.decide import Decision
from engine.state.ledger import note_prompt, sha256
from engine.state.session import EXECUTION_FAILURE, Outcome, Session
from engine.verdict import Verdict

MAX_OUTPUT_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RunResult:
    verdict: Verdict
    decision: Decision
    attempts: int
    output: bytes


@dataclass(frozen=True)
class Execution:
    output: bytes
    error: str | None  # why the command failed, None when it ran fine


def execute(command: Sequence[str], prompt: str, timeout: float | None) -> Execution:
    """Run ``command`` with ``prompt`` on stdin; never raises for what the command does."""
    try:
        done = subprocess.run(
            list(command),
            input=prompt.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Execution(b"", f"model command timed out after {timeout:g} s")
    except OSError as exc:
        return Execution(b"", f"model command could not start: {exc.strerror or exc}")
    if done.returncode != 0:
        how = (
            f"was killed by signal {-done.returncode}"
            if done.returncode < 0
            else f"exited with status {done.returncode}"
        )
        return Execution(done.stdout[:MAX_OUTPUT_BYTES], f"model command {how}")
    return Execution(done.stdout[:MAX_OUTPUT_BYTES], None)


def run_loop(
    session: Session,
    block: str,
    command: Sequence[str],
    *,
    prompt: str = "",
    nonce: str | None = None,
    vars: Mapping[str, str] | None = None,
    context: Mapping[str, Any] | None = None,
    model: str | None = None,
    timeout: float | None = None,
    progress: Callable[[Outcome], None] = lambda outcome: None,
) -> RunResult:
    attempts = 0
    current_prompt = prompt
    while True:
        attempts += 1
        run = execute(command, current_prompt, timeout)
        outcome = session.evaluate(
            block,
            run.output,
            nonce=nonce,
            vars=vars,
            context=context,
            model=model,
            error=run.error,
            failure_type=EXECUTION_FAILURE,
        )
        progress(outcome)
        decision = outcome.decision
        if decision.final:
            return RunResult(outcome.verdict, decision, attempts, run.output)
        if run.error is None and decision.template is not None:
            rendered = session.render_prompt(
                outcome.verdict,
                decision,
                output=run.output,
                nonce=nonce,
                vars=vars,
                context=context,
            )
            current_prompt = rendered.text
            note_prompt(
                session.ledger,
                outcome.attempt_id,
                {**asdict(rendered), "prompt_sha256": sha256(rendered.text)},
            )
        # an execution failure that the pack retries sends the same prompt again
