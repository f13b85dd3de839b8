"""``engine.run`` and ``engine.arun``: the repair/retry loop around any Python model client.

``call`` takes the prompt text and returns the model's output text (``arun``: an async
function). The loop is the one `rules run` drives (``engine.session.loop``): the same
decisions, prompts and ledger records. An exception raised by ``call`` is an
EXECUTION_FAILED attempt carrying the exception's type and message (no traceback, and never
in a prompt); ``timeout`` bounds each call the same way. A KeyboardInterrupt or a
cancellation propagates; the call it interrupted is not recorded, the attempts before it
are, whole.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from engine.core.errors import UsageError
from engine.core.files import path_problem
from engine.core.suggest import did_you_mean
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.pack.loaded import load_pack
from engine.session.loop import Execution, RunResult, adrive, attempts, drive
from engine.session.session import DEFAULT_SESSION, Session
from engine.session.tracing import record_run, run_span

if TYPE_CHECKING:
    from typing_extensions import Unpack

MAX_MESSAGE_CHARS = 500
"""How much of an exception's message an EXECUTION_FAILED attempt keeps."""

Call = Callable[[str], Any]


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


def run(
    pack: Pack | str | os.PathLike[str],
    block: str,
    call: Callable[[str], str],
    **options: Unpack[RunOptions],
) -> RunResult:
    """Send ``prompt`` (default: the pack's first prompt for ``block``) to ``call``, evaluate
    what it returns, repair or retry per the pack until its final decision; every attempt is
    recorded in the ledger of the ``session`` folder (default ``.rules-session``, as
    `rules run`). With ``timeout`` (default: the pack's ``limits.model_timeout``, else none)
    each call runs in a worker thread and a call still running after ``timeout`` seconds is
    an EXECUTION_FAILED attempt (the thread is left to finish on its own).

    The options (``RunOptions``, each optional, each None by default): ``session``,
    ``item``, ``prompt``, ``nonce``, ``vars``, ``context``, ``model``, ``timeout``."""
    with _loop(run, pack, block, call, options) as (loop, limit, loaded):
        with run_span(loaded, block, item=options.get("item"), model=options.get("model")) as span:
            result = drive(loop, lambda text: call_in_thread(call, text, limit))
            record_run(span, result)
        return result


async def arun(
    pack: Pack | str | os.PathLike[str],
    block: str,
    call: Callable[[str], Awaitable[str]],
    **options: Unpack[RunOptions],
) -> RunResult:
    """``run`` with an async ``call``; ``timeout`` bounds each call with
    ``asyncio.wait_for``. Cancelling the task cancels the call in flight and propagates."""
    with _loop(arun, pack, block, call, options) as (loop, limit, loaded):
        with run_span(loaded, block, item=options.get("item"), model=options.get("model")) as span:
            result = await adrive(loop, lambda text: call_async(call, text, limit))
            record_run(span, result)
        return result


@contextmanager
def _loop(
    entry: Callable[..., Any], pack: Any, block: Any, call: Any, options: RunOptions
) -> Iterator[tuple[Any, float | None, Pack]]:
    """The checked arguments' loop (over a session opened here and closed after) and the
    timeout of each call."""
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
    limit = _timeout(name, options.get("timeout"), loaded.model.limits.model_timeout)
    if vars is not None and (
        not isinstance(vars, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in vars.items())
    ):
        raise UsageError(f"{name}: vars= takes a dict of text to text, e.g. {{'criterion': 'AC1'}}")
    if context is not None and (
        not isinstance(context, Mapping) or not all(isinstance(k, str) for k in context)
    ):
        raise UsageError(f"{name}: context= takes a dict with text keys")
    if session is not None and not isinstance(session, (str, os.PathLike)):
        raise UsageError(f"{name}: session= takes the path of a session folder")
    if isinstance(session, (str, os.PathLike)) and (problem := path_problem(str(session))):
        raise UsageError(f"{name}: session= names no folder a session can have: {problem}")
    params, checked = loaded.split_inputs(block, context, vars)
    with Session(loaded, Path(session) if session is not None else DEFAULT_SESSION) as opened:
        first = (
            prompt
            if prompt is not None
            else _first_prompt(name, opened, block, nonce, params, checked)
        )
        prompt_key = loaded.model.session.prompt
        if first and prompt_key:  # the pack's own first prompt too: repairs carry the task
            checked.setdefault(prompt_key, first)
        given = OutputInput(
            block, nonce=nonce, vars=params, context=checked, model=model, item=item
        )
        yield attempts(opened, given, prompt=first), limit, loaded


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


def _timeout(name: str, value: Any, default: float | None) -> float | None:
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UsageError(f"{name}: timeout= takes a number of seconds above 0, not {value!r}")
    return float(value)


def _first_prompt(
    name: str,
    session: Session,
    block: str,
    nonce: str | None,
    params: dict[str, str],
    context: dict[str, Any],
) -> str:
    """The pack's first prompt for ``block``: a usage error when it declares none."""
    pack = session.pack
    if block not in pack.model.prompts:
        raise UsageError(
            f"{name}: pack {pack.name!r} declares no first prompt for block {block!r}: "
            f"pass prompt=... (or declare one in the pack's `prompts:` section)"
        )
    return str(
        pack.initial_prompt(
            block, vars=params, context=session.with_decisions(context), nonce=nonce
        )
    )


def raised(exc: BaseException) -> str:
    """An exception as an EXECUTION_FAILED error: its type and message on one line."""
    message = " ".join(str(exc).split())
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + "..."
    kind = type(exc).__qualname__
    return f"model call raised {kind}: {message}" if message else f"model call raised {kind}"


def output_of(value: Any) -> Execution:
    """What a call returned, as the output of an attempt."""
    if isinstance(value, str):
        return Execution(value, None)
    if isinstance(value, (bytes, bytearray)):
        return Execution(bytes(value), None)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "never awaited" warning
        raise UsageError(
            "engine.run: call= returned an awaitable: use `await engine.arun(...)` for an "
            "async call"
        )
    return Execution("", f"model call returned {type(value).__name__}, not the output text")


def guarded(call: Call, prompt: str) -> Execution:
    """``call(prompt)``, an exception it raises turned into an execution failure."""
    try:
        value = call(prompt)
    except Exception as exc:  # the model call failed: an EXECUTION_FAILED attempt
        return Execution("", raised(exc))
    return output_of(value)


def call_in_thread(call: Call, prompt: str, timeout: float | None) -> Execution:
    """``guarded`` in a worker thread, waited for at most ``timeout`` seconds (in this
    thread when there is no timeout)."""
    if timeout is None:
        return guarded(call, prompt)
    box: list[Execution | BaseException] = []

    def target() -> None:
        try:
            box.append(guarded(call, prompt))
        except BaseException as exc:  # handed to the waiting thread, raised there
            box.append(exc)

    worker = threading.Thread(target=target, name="rules-model-call", daemon=True)
    worker.start()
    worker.join(min(timeout, threading.TIMEOUT_MAX))  # a longer wait overflows: no bound
    if not box:
        return Execution("", f"model call timed out after {timeout:g} s")
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


async def call_async(call: Call, prompt: str, timeout: float | None) -> Execution:
    """``await call(prompt)`` bounded by ``timeout``; an exception it raises is an
    execution failure, a cancellation propagates."""

    async def attempt() -> Execution:
        try:
            pending = call(prompt)
        except Exception as exc:  # the model call failed: an EXECUTION_FAILED attempt
            return Execution("", raised(exc))
        if not inspect.isawaitable(pending):
            raise UsageError(
                "engine.arun: call= must be an async function (`async def`); for a plain "
                "function use engine.run"
            )
        try:
            value = await pending
        except Exception as exc:  # the model call failed: an EXECUTION_FAILED attempt
            return Execution("", raised(exc))
        return output_of(value)

    if timeout is None:
        return await attempt()
    try:
        return await asyncio.wait_for(attempt(), timeout)
    except asyncio.TimeoutError:  # attempt() lets no exception of the call through
        return Execution("", f"model call timed out after {timeout:g} s")
