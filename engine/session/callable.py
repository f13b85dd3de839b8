"""``engine.run`` and ``engine.arun``: the repair/retry loop around any Python model client.

``call`` takes the prompt text and returns the model's output text, a ``ModelReply`` or an
SDK's response object (``arun``: an async function). The loop is the one `rules run`
drives (``engine.session.run``): the same decisions, prompts and ledger records. An
exception raised by ``call`` is a failed attempt carrying the exception's type and message
(no traceback, and never in a prompt), classified by the pack's ``model_calls`` (by
default MODEL_RATE_LIMITED, MODEL_TIMEOUT, MODEL_UNAVAILABLE or MODEL_ERROR for the
exceptions of the openai, anthropic and httpx clients, else EXECUTION_FAILED); ``timeout``
bounds each call the same way (MODEL_TIMEOUT). A KeyboardInterrupt or a
cancellation propagates; the call it interrupted is not recorded, the attempts before it
are, whole.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from engine.core.errors import UsageError
from engine.core.files import path_problem
from engine.core.numbers import INT64_MAX
from engine.core.redaction import scrub
from engine.core.suggest import did_you_mean
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.pack.compiled import Pack
from engine.pack.loaded import load_pack
from engine.policy.calls.runtime import CallFailure, exception_failure
from engine.session.evaluation import InputRefused
from engine.session.returned import option_cap, option_seconds, returned_output, too_large
from engine.session.run import (
    REAL_WAITS,
    Execution,
    RunRequest,
    RunResult,
    arun_with,
    run_with,
)
from engine.session.session_ref import DEFAULT_SESSION, SessionRef
from engine.session.stream import (
    Streamed,
    Watch,
    aread_stream,
    is_async_stream,
    is_stream,
    new_watch,
    read_stream,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

LEDGER_ENV = "RULES_LEDGER"
"""The variable naming the ledger when ``ledger=`` is not given (as for `rules run`)."""

MAX_REVIEW_WAIT = 86_400
"""The longest ``review_wait=`` (a day), as the pack's ``reviews.wait``."""

MAX_MESSAGE_CHARS = 500
"""How much of an exception's message an EXECUTION_FAILED attempt keeps."""

Call = Callable[[str], Any]

WAITS = REAL_WAITS
"""How ``run`` waits before a transport retry (a test may replace it to control the
clock)."""


async def _sleep(seconds: float) -> None:
    """``arun``'s wait before a transport retry: ``WAITS.sleep`` when a test replaced it
    (run in a thread), else ``asyncio.sleep``."""
    if WAITS.sleep is REAL_WAITS.sleep:
        await asyncio.sleep(seconds)
    else:
        await asyncio.to_thread(WAITS.sleep, seconds)


class RunOptions(TypedDict, total=False):
    """The keyword options of ``run`` and ``arun`` (each optional)."""

    session: str | os.PathLike[str] | None
    """The session folder whose ledger counts the attempts (default ``.rules-session``)."""
    item: str | None
    """The item the attempts are counted under, as `rules run --item`."""
    prompt: str | None
    """The first prompt (default: the pack's first prompt for the block)."""
    nonce: str | None
    """The block's nonce, as `rules run --nonce`."""
    vars: Mapping[str, str] | None
    """The block's parameters and template variables, as `rules run --var`."""
    context: Mapping[str, Any] | None
    """The pack's context values, as `rules run --context`."""
    model: str | None
    """The model's name, recorded with each attempt and on the run's trace span."""
    timeout: float | None
    """Seconds each call may take (default: the pack's ``limits.model_timeout``, else none)."""
    max_output_bytes: int | None
    """The most a call may return, in bytes (UTF-8 for text); more is an EXECUTION_FAILED
    attempt, as `rules run --max-output-bytes` (default: the pack's
    ``limits.max_output_bytes``, else 64 MiB)."""
    continue_run: bool | None
    """Continue the item's latest run even when it ended (its count and caps go on), as
    `rules run --continue`; by default a run after a finished one starts at attempt 1."""
    review_wait: float | None
    """Seconds to wait for a review the final decision opens (the pack's ``reviews:``) to
    be resolved, as `rules run --wait-review` (default: the pack's ``reviews.wait``; 0:
    return at once, ``RunResult.review`` holding the review's id), at most a day."""
    ledger: str | os.PathLike[str] | None
    """The ledger the session is recorded in, as `rules run --ledger`: a path or
    ``sqlite:///path``, or ``postgresql://...`` where ``session`` is the session's name
    (default: ``$RULES_LEDGER``, else the session folder's own ledger)."""
    max_output_tokens: int | None
    """The most tokens a call may generate, as its request to the provider declares it
    (``max_tokens``, ``max_output_tokens``): a stream closed early records what it did
    not generate from it (default: the output cap in tokens, a looser bound)."""


def run(
    pack: Pack | str | os.PathLike[str],
    block: str,
    call: Callable[[str], object],
    **options: Unpack[RunOptions],
) -> RunResult:
    """Send ``prompt`` (default: the pack's first prompt for ``block``) to ``call``, evaluate
    what it returns, repair or retry per the pack until its final decision; every attempt is
    recorded in the ledger of the ``session`` folder (default ``.rules-session``, as
    `rules run`). With ``timeout`` (default: the pack's ``limits.model_timeout``, else none)
    each call runs in a worker thread and a call still running after ``timeout`` seconds is
    a MODEL_TIMEOUT attempt (the thread is left to finish on its own). ``call`` returns
    the output text, a ``ModelReply`` or an SDK's response object (its usage is read);
    what it raises is classified by the pack's ``model_calls`` and may be retried at the
    transport (docs/costs.md).

    The options (``RunOptions``, each optional, each None by default): ``session``,
    ``item``, ``prompt``, ``nonce``, ``vars``, ``context``, ``model``, ``timeout``,
    ``max_output_bytes``, ``continue_run``, ``review_wait``, ``ledger``,
    ``max_output_tokens``."""
    loaded, request, limit, cap = _request(run, pack, block, call, options)
    with _refusals(run):
        watch = _watch(loaded, request, cap, _max_tokens(run, options))
        return run_with(
            loaded,
            request,
            ModelCall(call, limit, cap, watch).in_thread,
            waits=WAITS,
        )


async def arun(
    pack: Pack | str | os.PathLike[str],
    block: str,
    call: Callable[[str], Awaitable[object]],
    **options: Unpack[RunOptions],
) -> RunResult:
    """``run`` with an async ``call``; ``timeout`` bounds each call with
    ``asyncio.wait_for``. Cancelling the task cancels the call in flight and propagates."""
    loaded, request, limit, cap = _request(arun, pack, block, call, options)
    with _refusals(arun):
        watch = _watch(loaded, request, cap, _max_tokens(arun, options))
        return await arun_with(
            loaded,
            request,
            ModelCall(call, limit, cap, watch).awaited,
            lambda seconds: _sleep(seconds),
            waits=WAITS,
        )


def _watch(
    pack: Pack, request: RunRequest, cap: int, max_tokens: int | None
) -> Callable[[], Watch]:
    """A fresh watch for each streamed output of the run (``engine.session.stream``)."""
    return new_watch(
        pack, request.block, request.nonce, request.vars, request.context, cap, max_tokens
    )


def _max_tokens(entry: Callable[..., Any], options: RunOptions) -> int | None:
    """``max_output_tokens=``: a whole number of tokens from 1, or None."""
    value = options.get("max_output_tokens")
    if value is not None and (type(value) is not int or not 1 <= value <= INT64_MAX):
        raise UsageError(
            f"engine.{entry.__name__}: max_output_tokens= takes a whole number of tokens "
            f"from 1 to {INT64_MAX} (the call's max_tokens), not {value!r:.60}"
        )
    return value


def _request(
    entry: Callable[..., Any], pack: Any, block: Any, call: Any, options: RunOptions
) -> tuple[Pack, RunRequest, float | None, int]:
    """The checked arguments: the pack, the run they ask for, the timeout of each call and
    the cap on what it returns."""
    name = f"engine.{entry.__name__}"
    known = RunOptions.__annotations__
    for key in options:
        if key not in known:
            hint = did_you_mean(key, known, shown=lambda k: f"{k}=")
            raise UsageError(
                f"{name}: there is no option {key}= ({hint + ' ' if hint else ''}the options "
                f"are {', '.join(f'{k}=' for k in known)})"
            )
    session, item, prompt = options.get("session"), options.get("item"), options.get("prompt")
    nonce, vars, context = options.get("nonce"), options.get("vars"), options.get("context")
    model = options.get("model")
    loaded = _pack(name, pack)
    _text(name, "block", block)
    if not callable(call):
        raise UsageError(
            f"{name}: call= takes a function of the prompt text that returns the model's "
            f"output text, not {type(call).__name__}"
        )
    for key, value in (("item", item), ("prompt", prompt), ("nonce", nonce), ("model", model)):
        _text(name, key, value, optional=True)
    limit = option_seconds(name, options.get("timeout"), loaded.model.limits.model_timeout)
    cap = option_cap(name, options.get("max_output_bytes"), loaded.model.limits.max_output_bytes)
    if vars is not None and (
        not isinstance(vars, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in vars.items())
    ):
        raise UsageError(f"{name}: vars= takes a dict of text to text, e.g. {{'criterion': 'AC1'}}")
    if context is not None and (
        not isinstance(context, Mapping) or not all(isinstance(k, str) for k in context)
    ):
        raise UsageError(f"{name}: context= takes a dict with text keys")
    continue_run = options.get("continue_run")
    if continue_run is not None and not isinstance(continue_run, bool):
        raise UsageError(f"{name}: continue_run= takes True or False")
    if session is not None and not isinstance(session, (str, os.PathLike)):
        raise UsageError(f"{name}: session= takes the path of a session folder")
    if isinstance(session, (str, os.PathLike)) and (problem := path_problem(str(session))):
        raise UsageError(f"{name}: session= names no folder a session can have: {problem}")
    ledger = options.get("ledger")
    if ledger is None:
        ledger = os.environ.get(LEDGER_ENV) or None  # as `rules run`: the option wins
    elif not isinstance(ledger, (str, os.PathLike)) or not str(ledger).strip():
        raise UsageError(
            f"{name}: ledger= takes a path, sqlite:///path or postgresql://... URL, "
            f"not {ledger!r:.60}"
        )
    wait = options.get("review_wait")
    if wait is not None and (
        isinstance(wait, bool)
        or not isinstance(wait, (int, float))
        or not 0 <= wait <= MAX_REVIEW_WAIT
    ):
        raise UsageError(f"{name}: review_wait= takes seconds from 0 to {MAX_REVIEW_WAIT}")
    request = RunRequest(
        block,
        prompt,
        nonce,
        vars or {},
        context or {},
        model,
        item,
        SessionRef(
            Path(session) if session is not None else DEFAULT_SESSION,
            None if ledger is None else str(ledger),
        ),
        continue_run=bool(continue_run),
        review_wait=None if wait is None else float(wait),
    )
    return loaded, request, limit, cap


@contextmanager
def _refusals(entry: Callable[..., Any]) -> Iterator[None]:
    """A run the use case refuses as a usage error naming the keyword argument."""
    try:
        yield
    except InputRefused as exc:
        said = exc.said(lambda field: f"{field}=...")
        raise UsageError(f"engine.{entry.__name__}: {said}") from None


def _pack(name: str, pack: Any) -> Pack:
    if isinstance(pack, Pack):
        return pack
    if isinstance(pack, (str, os.PathLike)):
        return load_pack(pack if isinstance(pack, str) else Path(pack))
    raise UsageError(
        f"{name}: pack= takes a Pack (engine.load_pack(...)) or a pack name or path, "
        f"not {type(pack).__name__}"
    )


def _text(name: str, key: str, value: Any, optional: bool = False) -> None:
    if isinstance(value, str) or (optional and value is None):
        return
    raise UsageError(f"{name}: {key}= takes text (str), not {type(value).__name__}")


def raised(exc: BaseException) -> str:
    """An exception as an attempt's error: its type and message on one line."""
    return _raised(exc)[0]


def _raised(exc: BaseException) -> tuple[str, str]:
    """An exception's error (its type and message on one line) and its message."""
    try:
        message = " ".join(str(exc).split())
        # a lone surrogate shown escaped: the message is recorded in the ledger as UTF-8
        message = scrub(message.encode("utf-8", "backslashreplace").decode("utf-8"))
    except Exception:  # an exception whose __str__ raises: its type alone
        message = ""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    try:  # read from `type` itself: a metaclass of the caller's may raise on the name
        kind = str(type.__getattribute__(type(exc), "__qualname__"))
    except Exception:
        kind = "an exception"
    return (
        f"model call raised {kind}: {message}" if message else f"model call raised {kind}",
        message,
    )


def failed(exc: Exception) -> Execution:
    """The execution of a call that raised ``exc``: its error, and what classification
    reads of it (class names, HTTP status, Retry-After)."""
    error, message = _raised(exc)
    return Execution("", error, failure=exception_failure(exc, message))


def timed_out(timeout: float) -> Execution:
    """The execution of a call the engine stopped waiting for."""
    return Execution(
        "", f"model call timed out after {timeout:g} s", failure=CallFailure(timed_out=True)
    )


def output_of(
    value: Any, cap: int = MAX_OUTPUT_BYTES, watch: Callable[[], Watch] | None = None
) -> Execution:
    """What a call returned, as the output of an attempt (``engine.session.returned``); a
    stream read through a fresh ``watch`` (``engine.session.stream``)."""
    if watch is not None and is_stream(value):
        if is_async_stream(value):
            return Execution(
                "", "model call returned an async stream: use `await engine.arun(...)`"
            )
        return streamed_execution(read_stream(value, watch()), cap)
    return returned_output(value, cap)


def streamed_execution(streamed: Streamed, cap: int) -> Execution:
    """A stream read (to its end, or cut at a definite failure) as an attempt's output."""
    if streamed.raised is not None:  # classified as a call that raised it
        return replace(failed(streamed.raised), stream=streamed.end)
    if streamed.error is not None:
        return Execution("", streamed.error, stream=streamed.end)
    if streamed.over_cap:
        return Execution("", too_large(cap), stream=streamed.end)
    return Execution(streamed.output, None, stream=streamed.end, shared=streamed.shared)


@dataclass(frozen=True)
class ModelCall:
    """The caller's model call with the bounds of each attempt: at most ``timeout`` seconds
    (None: no bound), at most ``cap`` bytes of output, and a fresh ``watch`` for each
    streamed output. ``engine.run`` sends each prompt ``in_thread``, ``engine.arun``
    ``awaited``."""

    call: Call
    timeout: float | None
    cap: int = MAX_OUTPUT_BYTES
    watch: Callable[[], Watch] | None = None

    def guarded(self, prompt: str) -> Execution:
        """``call(prompt)``, an exception it raises turned into an execution failure."""
        try:
            value = self.call(prompt)
        except Exception as exc:  # the model call failed: a failed attempt, classified
            return failed(exc)
        return output_of(value, self.cap, self.watch)

    def in_thread(self, prompt: str) -> Execution:
        """``guarded`` in a worker thread, waited for at most ``timeout`` seconds (in this
        thread when there is no timeout)."""
        timeout = self.timeout
        if timeout is None:
            return self.guarded(prompt)
        box: list[Execution | BaseException] = []

        def target() -> None:
            try:
                box.append(self.guarded(prompt))
            except BaseException as exc:  # handed to the waiting thread, raised there
                box.append(exc)

        worker = threading.Thread(target=target, name="rules-model-call", daemon=True)
        worker.start()
        worker.join(min(timeout, threading.TIMEOUT_MAX))  # a longer wait overflows: no bound
        if not box:
            return timed_out(timeout)
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    async def awaited(self, prompt: str) -> Execution:
        """``await call(prompt)`` bounded by ``timeout``; an exception it raises is an
        execution failure, a cancellation propagates."""
        call, cap, watch, timeout = self.call, self.cap, self.watch, self.timeout

        async def attempt() -> Execution:
            try:
                pending = call(prompt)
            except Exception as exc:  # the model call failed: a failed attempt, classified
                return failed(exc)
            if watch is not None and is_async_stream(pending):  # an async generator function
                return streamed_execution(await aread_stream(pending, watch()), cap)
            if not inspect.isawaitable(pending):
                raise UsageError(
                    "engine.arun: call= must be an async function (`async def`); for a plain "
                    "function use engine.run"
                )
            try:
                value = await pending
            except Exception as exc:  # the model call failed: a failed attempt, classified
                return failed(exc)
            if watch is not None and is_async_stream(value):  # an SDK's async stream
                return streamed_execution(await aread_stream(value, watch()), cap)
            return output_of(value, cap, watch)

        if timeout is None:
            return await attempt()
        try:
            return await asyncio.wait_for(attempt(), timeout)
        except asyncio.TimeoutError:  # attempt() lets no exception of the call through
            return timed_out(timeout)
