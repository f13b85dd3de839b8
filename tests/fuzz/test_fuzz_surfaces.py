"""The fuzzing harness on the surfaces of issue 35 (item 7): what a Python model call returns
to ``engine.run``/``engine.arun``. Each example runs under the harness's 10 s and 1 GiB.

The default suite runs a few derandomized examples of each target; the slow suite runs more
(``RULES_FUZZ_EXPLORE=1 RULES_FUZZ_EXAMPLES=N`` draws N new ones)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import Case, Overrun, _bounded, _write
from hypothesis import given, settings
from returns import Answer, api_pack_files, return_cases
from test_fuzz import FUZZ, SMOKE

import engine
from engine.core.errors import UsageError
from engine.session.run import RunResult

AWAITED = ("returns a coroutine", "returns an object with __await__", "returns an awaitable")


def run_returns(
    block: str,
    pack: dict[str, Any],
    calls: list[tuple[str, Answer]],
    options: dict[str, Any],
    asynchronous: bool,
) -> str | None:
    """``engine.run`` (or ``arun``) with a call doing ``calls`` in turn (the last one again
    after that); what is wrong with how it ended, or None. A run ends in a RunResult whose
    data is JSON, or in a UsageError when a sync call returned an awaitable."""
    queue = list(calls)

    def call(prompt: str) -> Any:
        _, thunk = queue[0] if len(queue) == 1 else queue.pop(0)
        return thunk()

    async def acall(prompt: str) -> Any:
        return call(prompt)

    awaited = any(said.startswith(AWAITED) for said, _ in calls)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        _write(Case((), api_pack_files(pack)), folder)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            with _bounded():
                if asynchronous:
                    result = asyncio.run(engine.arun(".", block, acall, **options))
                else:
                    result = engine.run(".", block, call, **options)
        except UsageError as exc:
            return None if awaited else f"a UsageError for no awaitable: {exc}"
        except Overrun as exc:
            return str(exc)
        except MemoryError:
            return "over 1 GiB (MemoryError)"
        except Exception as exc:  # what the harness looks for
            return f"internal error: {type(exc).__name__}: {str(exc)[:300]}"
        finally:
            os.chdir(cwd)
    if not isinstance(result, RunResult):
        return f"not a RunResult: {type(result).__name__}"
    for attempt in result.attempts:
        if type(attempt.output) not in (str, bytes):
            return f"an attempt's output is a {type(attempt.output).__name__}"
    try:
        json.dumps(result.data, allow_nan=False)
        json.dumps([failure.message for failure in result.verdict.failures])
    except (TypeError, ValueError) as exc:
        return f"the run's data or messages are not JSON: {exc}"
    return None


def _returns(case: Any) -> None:
    block, pack, calls, options, asynchronous = case
    problem = run_returns(block, pack, calls, options, asynchronous)
    entry = "arun" if asynchronous else "run"
    shown = f"engine.{entry}(pack, {block!r}, call that {[said for said, _ in calls]}, **{options})"
    assert problem is None, f"{problem}\n{shown}"


@pytest.mark.slow
def test_fuzz_returns() -> None:
    """Hostile return values and exceptions of a model call: a RunResult or a UsageError."""

    @FUZZ
    @given(case=return_cases())
    def run(case: Any) -> None:
        _returns(case)

    run()


def test_fuzz_returns_smoke() -> None:
    @settings(SMOKE, max_examples=5)
    @given(case=return_cases())
    def run(case: Any) -> None:
        _returns(case)

    run()


def test_an_exception_whose_type_name_raises_is_an_execution_failure() -> None:
    """Found by test_fuzz_returns: a call raising an exception whose metaclass raises on
    ``__qualname__`` came out of engine.run as that exception."""
    from returns import MetaError

    def thunk() -> Any:
        raise MetaError("meta")

    from returns import RUN_PACK, X_CONTRACT
    from strategies import BASE_PACK

    pack = {**RUN_PACK, "contracts": {**BASE_PACK["contracts"], "x": X_CONTRACT}}
    assert run_returns("doc", pack, [("raises MetaError", thunk)], {}, False) is None


def test_an_exception_message_with_a_lone_surrogate_is_an_execution_failure() -> None:
    """Found by test_fuzz_returns: the message of an OSError holding "\\ud800" failed to be
    recorded in the ledger (UnicodeEncodeError out of engine.run)."""
    from returns import RUN_PACK, X_CONTRACT
    from strategies import BASE_PACK

    def thunk() -> Any:
        raise OSError(5, "x\ud800")

    pack = {**RUN_PACK, "contracts": {**BASE_PACK["contracts"], "x": X_CONTRACT}}
    assert run_returns("doc", pack, [("raises OSError", thunk)], {}, False) is None
