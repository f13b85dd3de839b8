"""`engine.run` and `engine.arun`: the repair loop around Python callables (a plain
function, an async function with delays, a real HTTP client against a local fake model
server), with the same decisions, prompts and ledger rows as `rules run`."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from sentinel_cases import VERDICT_ARGS

import engine
from conftest import FIXTURES, REPO, run_script, script
from engine.ledger.store import SessionLedger, locate

VERDICT = {"nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
PROMPT = "Judge AC1 and answer with a VERDICT block.\n"
DATA = {"criterion_id": "AC1", "answer": "YES", "reason": "All acceptance criteria are satisfied"}


def answer(prompt: str) -> str:
    """What examples/fake_model.py answers: a malformed VERDICT first, a good one to a
    format-repair prompt."""
    nonce = re.search(r"NONCE[:=] ?([0-9A-F]{6})", prompt)
    criterion = re.search(r"Criterion ID \(if VERDICT\): (\S+)", prompt)
    n = nonce.group(1) if nonce else "4F2C9A"
    c = criterion.group(1) if criterion else "AC1"
    value = "YES" if "format-repair agent" in prompt else '"YES"'
    return (
        f"<<<VERDICT:V1:{c}:NONCE={n}>>>\nANSWER={value}\n"
        f'REASON="All acceptance criteria are satisfied"\n<<<END_VERDICT:{c}:NONCE={n}>>>\n'
    )


def rows(session: Path) -> list[dict[str, Any]]:
    ledger = SessionLedger(locate(session))
    try:
        return ledger.attempts()
    finally:
        ledger.close()


def consistent(session: Path) -> list[dict[str, Any]]:
    """The ledger's rows, each an attempt with its decision; numbered 1, 2, ... per item."""
    found = rows(session)
    for row in found:
        assert row["action"] and row["reason"] and row["rule"], row
        assert row["status"] in ("pass", "fail", "warn"), row
    by_item: dict[str, list[int]] = {}
    for row in found:
        by_item.setdefault(row["item"], []).append(row["attempt"])
    for numbers in by_item.values():
        assert numbers == list(range(1, len(numbers) + 1))
    return found


COLUMNS = ("attempt", "status", "failure_type", "error", "action", "rule", "prompt_sha256")


def test_a_plain_function_repairs_as_rules_run_does(tmp_path: Path) -> None:
    prompts: list[str] = []

    def call(prompt: str) -> str:
        prompts.append(prompt)
        return answer(prompt)

    result = engine.run(
        "sentinel", "VERDICT", call, session=tmp_path / "py", prompt=PROMPT, **VERDICT
    )
    assert isinstance(result, engine.RunResult)
    assert result.decision.action == "PROCEED"
    assert result.data == DATA == result.verdict.data
    assert [(a.verdict.status, a.decision.action) for a in result.attempts] == [
        ("fail", "REPAIR"),
        ("pass", "PROCEED"),
    ]
    assert [a.prompt for a in result.attempts] == prompts
    assert prompts[0] == PROMPT and "format-repair agent" in prompts[1]
    assert result.attempts[0].output == answer(PROMPT)

    (tmp_path / "prompt.txt").write_text(PROMPT)
    done = run_script(
        script("rules"),
        "run",
        *VERDICT_ARGS,
        "--prompt",
        str(tmp_path / "prompt.txt"),
        "--session",
        str(tmp_path / "cli"),
        "--",
        sys.executable,
        str(REPO / "examples" / "fake_model.py"),
    )
    assert done.returncode == 0, done.stderr
    shown = [[row[c] for c in COLUMNS] for row in consistent(tmp_path / "py")]
    assert shown == [[row[c] for c in COLUMNS] for row in consistent(tmp_path / "cli")]
    assert shown[0][-1] is not None  # the repair prompt is recorded


def test_async_calls_with_delays_run_side_by_side(tmp_path: Path) -> None:
    async def call(prompt: str) -> str:
        await asyncio.sleep(0.05)
        return answer(prompt)

    async def main() -> list[engine.RunResult]:
        return await asyncio.gather(
            *(
                engine.arun(
                    "sentinel",
                    "VERDICT",
                    call,
                    session=tmp_path / "s",
                    item=f"case-{n}",
                    prompt=PROMPT,
                    **VERDICT,
                )
                for n in range(3)
            )
        )

    results = asyncio.run(main())
    assert [r.data for r in results] == [DATA] * 3
    found = consistent(tmp_path / "s")
    assert sorted((r["item"], r["attempt"], r["action"]) for r in found) == [
        (f'{{"item": "case-{n}"}}', k, action)
        for n in range(3)
        for k, action in ((1, "REPAIR"), (2, "PROCEED"))
    ]


class _FakeModel(BaseHTTPRequestHandler):
    """POST /v1/complete {"prompt": ...} -> {"text": ...}."""

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        prompt = json.loads(self.rfile.read(length))["prompt"]
        if "fail-with-503" in prompt:
            self.send_response(503)
            self.end_headers()
            return
        body = json.dumps({"text": answer(prompt)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def model_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/complete"
    finally:
        server.shutdown()
        server.server_close()


def test_a_loop_against_a_local_http_model_server(tmp_path: Path, model_server: str) -> None:
    async def main() -> engine.RunResult:
        async with httpx.AsyncClient(timeout=10) as client:

            async def call(prompt: str) -> str:
                response = await client.post(model_server, json={"prompt": prompt})
                response.raise_for_status()
                return str(response.json()["text"])

            return await engine.arun(
                "sentinel", "VERDICT", call, session=tmp_path / "s", prompt=PROMPT, **VERDICT
            )

    result = asyncio.run(main())
    assert result.data == DATA
    assert [r["action"] for r in consistent(tmp_path / "s")] == ["REPAIR", "PROCEED"]

    with httpx.Client(timeout=10) as client:

        def call(prompt: str) -> str:
            response = client.post(model_server, json={"prompt": prompt})
            response.raise_for_status()
            return str(response.json()["text"])

        failed = engine.run(
            "sentinel",
            "VERDICT",
            call,
            session=tmp_path / "t",
            prompt="fail-with-503",
            timeout=10,
            **VERDICT,
        )
    assert failed.decision.action == "NEEDS_HUMAN"
    assert failed.verdict.failure_type == "EXECUTION_FAILED"
    assert failed.verdict.error is not None
    assert failed.verdict.error.startswith("model call raised HTTPStatusError: Server error '503")


def test_an_exception_is_an_execution_failure_with_its_type_and_message(tmp_path: Path) -> None:
    def call(prompt: str) -> str:
        raise ValueError("the API said no\nTraceback (most recent call last): SECRET")

    result = engine.run("sentinel", "VERDICT", call, session=tmp_path / "s", prompt="p", **VERDICT)
    assert result.verdict.failure_type == "EXECUTION_FAILED"
    assert result.verdict.error == (
        "model call raised ValueError: the API said no Traceback (most recent call last): SECRET"
    )
    [row] = consistent(tmp_path / "s")
    assert (row["failure_type"], row["validation"], row["action"]) == (
        "EXECUTION_FAILED",
        "execution",
        "NEEDS_HUMAN",
    )
    assert result.data is None


def test_a_call_that_hangs_past_the_timeout_is_an_execution_failure(tmp_path: Path) -> None:
    release = threading.Event()

    def call(prompt: str) -> str:
        release.wait(30)
        return answer(prompt)

    start = time.monotonic()
    try:
        result = engine.run(
            "sentinel", "VERDICT", call, session=tmp_path / "s", prompt="p", timeout=0.3, **VERDICT
        )
    finally:
        release.set()
    assert time.monotonic() - start < 10
    assert result.verdict.error == "model call timed out after 0.3 s"
    [row] = consistent(tmp_path / "s")
    assert row["failure_type"] == "EXECUTION_FAILED"

    async def slow(prompt: str) -> str:
        await asyncio.sleep(30)
        return ""

    start = time.monotonic()
    late = asyncio.run(
        engine.arun(
            "sentinel", "VERDICT", slow, session=tmp_path / "a", prompt="p", timeout=0.2, **VERDICT
        )
    )
    assert time.monotonic() - start < 10
    assert late.verdict.error == "model call timed out after 0.2 s"
    assert [r["failure_type"] for r in consistent(tmp_path / "a")] == ["EXECUTION_FAILED"]


@pytest.mark.parametrize("timeout", [1e308, 2.0**63, 1e10])
def test_a_timeout_longer_than_a_thread_can_wait_is_no_bound(
    tmp_path: Path, timeout: float
) -> None:
    """A thread waits at most threading.TIMEOUT_MAX (about 292 years): a longer timeout was
    an internal OverflowError once the call was made."""
    result = engine.run(
        "sentinel",
        "VERDICT",
        answer,
        session=tmp_path / "s",
        prompt="p",
        timeout=timeout,
        **VERDICT,
    )
    assert result.data == DATA
    assert len(result.attempts) == 2  # the malformed first answer, then its repair


def test_a_cancelled_run_leaves_only_whole_attempts(tmp_path: Path) -> None:
    calls: list[str] = []
    second = asyncio.Event()

    async def call(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 2:
            second.set()
            await asyncio.sleep(30)  # cancelled here
        return answer(prompt)

    async def main() -> None:
        task = asyncio.create_task(
            engine.arun(
                "sentinel", "VERDICT", call, session=tmp_path / "s", prompt=PROMPT, **VERDICT
            )
        )
        await asyncio.wait_for(second.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    [row] = consistent(tmp_path / "s")
    assert (row["attempt"], row["action"]) == (1, "REPAIR")
    assert row["prompt_sha256"] is not None  # the first attempt is whole, prompt included


def test_keyboard_interrupt_propagates_and_records_nothing_half(tmp_path: Path) -> None:
    calls: list[str] = []

    def call(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return answer(prompt)

    for timeout in (None, 5.0):
        calls.clear()
        folder = tmp_path / f"s{timeout}"
        with pytest.raises(KeyboardInterrupt):
            engine.run(
                "sentinel",
                "VERDICT",
                call,
                session=folder,
                prompt=PROMPT,
                timeout=timeout,
                **VERDICT,
            )
        assert [(r["attempt"], r["action"]) for r in consistent(folder)] == [(1, "REPAIR")]


def test_what_a_call_returns_must_be_text(tmp_path: Path) -> None:
    result = engine.run(
        "sentinel", "VERDICT", lambda p: None, session=tmp_path / "s", prompt="p", **VERDICT
    )
    assert result.verdict.error == "model call returned NoneType, not the output text"

    async def call(prompt: str) -> str:
        return answer(prompt)

    with pytest.raises(engine.UsageError, match=r"use `await engine.arun\(...\)`"):
        engine.run("sentinel", "VERDICT", call, session=tmp_path / "t", prompt="p", **VERDICT)
    with pytest.raises(engine.UsageError, match="must be an async function"):
        asyncio.run(
            engine.arun(
                "sentinel", "VERDICT", answer, session=tmp_path / "u", prompt="p", **VERDICT
            )
        )
    assert rows(tmp_path / "t") == [] and rows(tmp_path / "u") == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"pack": 3}, "pack= takes a Pack"),
        ({"block": None}, r"block= takes text \(str\), not NoneType"),
        ({"block": "NOPE"}, "has no block 'NOPE'"),
        ({"call": "model"}, "call= takes a function of the prompt text"),
        ({"timeout": 0}, "timeout= takes a number of seconds above 0"),
        ({"timeout": float("nan")}, "timeout= takes a number of seconds above 0"),
        ({"vars": {"criterion": 1}}, "vars= takes a dict of text to text"),
        ({"context": ["a"]}, "context= takes a dict"),
        ({"nonce": 4}, "nonce= takes text"),
        ({"nonce": "4F2C9A\ud800"}, r"nonce: must be text \(it holds a lone surrogate"),
        ({"model": "m\udcff"}, r"model: must be text \(it holds a lone surrogate"),
        ({"vars": {"criterion": "AC\ud800"}}, r"vars\['criterion'\]: must be text"),
        ({"session": "s\0"}, "session= names no folder a session can have: it holds a NUL"),
        ({"session": "s\ud800"}, "session= names no folder .*: it holds a character no file"),
        ({"session": "s" * 300}, "session= names no folder .*: a part of it is longer than 255"),
        (
            {
                "pack": str(FIXTURES / "packs/json_text"),
                "block": "task",
                "vars": {},
                "prompt": None,
            },
            r"declares no first prompt for block 'task': pass prompt=\.\.\.",
        ),
        ({"timout": 5}, r"there is no option timout= \(did you mean timeout=\? the options are "),
        ({"retries": 2}, r"no option retries= \(the options are session=, item=, prompt=,"),
    ],
)
def test_caller_mistakes_are_engine_errors_saying_what_to_pass(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    given: dict[str, Any] = {
        "pack": "sentinel",
        "block": "VERDICT",
        "call": answer,
        "session": tmp_path / "s",
        "prompt": PROMPT,
        **VERDICT,
        **arguments,
    }
    refused = engine.EngineError if "no block" in message or "must be text" in message else None
    with pytest.raises(refused or engine.UsageError) as e:
        engine.run(given.pop("pack"), given.pop("block"), given.pop("call"), **given)
    assert re.search(message, str(e.value)), str(e.value)
    assert isinstance(e.value, engine.EngineError)
