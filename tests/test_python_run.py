"""`engine.run` and `engine.arun`: the repair loop around Python callables (a plain
function, an async function with delays, a real HTTP client against a local fake model
server), with the same decisions, prompts and ledger rows as `rules run`."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
import threading
import time
import tracemalloc
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
    # httpx's HTTPStatusError carries the response: its 503 is classified (model_calls)
    assert failed.verdict.failure_type == "MODEL_UNAVAILABLE"
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


@pytest.mark.heavy
def test_a_call_that_hangs_past_the_timeout_is_a_model_timeout(tmp_path: Path) -> None:
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
    assert row["failure_type"] == "MODEL_TIMEOUT"

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
    assert [r["failure_type"] for r in consistent(tmp_path / "a")] == ["MODEL_TIMEOUT"]


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


@pytest.mark.heavy
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


def capped_sentinel(folder: Path, cap: int) -> Path:
    """The sentinel pack with ``limits.max_output_bytes: cap``."""
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    pack = folder / "pack.yaml"
    text = pack.read_text(encoding="utf-8")
    # the pack's own `limits:` (its prompt budget) gets the cap beside it
    limited = text.replace("\nlimits: {", f"\nlimits: {{max_output_bytes: {cap}, ", 1)
    assert limited != text
    pack.write_text(limited, encoding="utf-8")
    return folder


def test_a_return_over_the_packs_output_cap_is_an_execution_failure(tmp_path: Path) -> None:
    """As `rules run` stops a command printing more than the pack's max_output_bytes, a call
    returning more is an EXECUTION_FAILED attempt: a valid VERDICT padded to 6 KB was
    PROCEED under a pack whose cap is 4096 bytes."""
    pack = capped_sentinel(tmp_path / "pack", 4096)

    def big(prompt: str) -> str:
        return answer(prompt) + "x" * 6000

    result = engine.run(str(pack), "VERDICT", big, session=tmp_path / "s", prompt=PROMPT, **VERDICT)
    assert [a.verdict.failure_type for a in result.attempts] == ["EXECUTION_FAILED"] * len(
        result.attempts
    )
    assert result.decision.action != "PROCEED"
    assert result.verdict.error == "model call returned more than 4096 bytes (UTF-8)"

    async def abig(prompt: str) -> bytes:
        return big(prompt).encode()

    awaited = asyncio.run(
        engine.arun(str(pack), "VERDICT", abig, session=tmp_path / "a", prompt=PROMPT, **VERDICT)
    )
    assert awaited.verdict.error == "model call returned more than 4096 bytes"
    # bytes are measured as bytes, text in UTF-8 (2000 two-byte characters are 4000 bytes)
    fits = engine.run(
        str(pack),
        "VERDICT",
        lambda p: answer(p).encode() if "format-repair" in p else "é" * 2000,
        session=tmp_path / "t",
        prompt=PROMPT,
        **VERDICT,
    )
    assert fits.attempts[0].verdict.failure_type != "EXECUTION_FAILED"
    over = engine.run(
        str(pack),
        "VERDICT",
        lambda p: "é" * 2049,
        session=tmp_path / "u",
        prompt=PROMPT,
        max_output_bytes=10**9,  # the option wins over the pack's cap, as in `rules run`
        **VERDICT,
    )
    assert over.attempts[0].verdict.failure_type != "EXECUTION_FAILED"


@pytest.mark.heavy
def test_a_huge_return_is_refused_without_being_copied(tmp_path: Path) -> None:
    """The default cap (64 MiB) holds for a call's return: a 10**8-character text was read
    whole (encoded, 334 MB of memory); it is refused from its length."""
    huge = "x" * 10**8

    def call(prompt: str) -> str:
        return huge

    tracemalloc.start()
    try:
        result = engine.run(
            "sentinel", "VERDICT", call, session=tmp_path / "s", prompt="p", **VERDICT
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.verdict.error == "model call returned more than 67108864 bytes (UTF-8)"
    assert peak < 50 * 1024 * 1024, peak


class _Hostile(str):
    """A str whose own methods raise: what a call returns is the caller's object."""

    def __len__(self) -> int:
        raise RuntimeError("no length")

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        raise RuntimeError("no bytes")


class _Lying:
    """An object claiming to be a str."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str


def test_a_hostile_return_value_is_an_execution_failure_not_a_traceback(tmp_path: Path) -> None:
    """A str subclass whose __len__ raises was a RuntimeError out of engine.run; read
    through str's own methods, it is the text it holds; an object only claiming to be a str
    is an EXECUTION_FAILED attempt."""
    result = engine.run(
        "sentinel",
        "VERDICT",
        lambda p: _Hostile(answer(p)),
        session=tmp_path / "s",
        prompt=PROMPT,
        **VERDICT,
    )
    assert [a.decision.action for a in result.attempts] == ["REPAIR", "PROCEED"]
    assert all(type(a.output) is str for a in result.attempts)
    lying = engine.run(
        "sentinel", "VERDICT", lambda p: _Lying(), session=tmp_path / "t", prompt="p", **VERDICT
    )
    assert lying.verdict.failure_type == "EXECUTION_FAILED"
    assert lying.verdict.error == "model call returned _Lying, not the output text"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"timeout": 10**400}, r"timeout= .* not an integer of about 401 digits"),
        ({"timeout": -(10**400)}, r"timeout= takes a number of seconds above 0"),
        ({"timeout": float("inf")}, r"timeout= .*, not inf"),
        ({"timeout": True}, r"timeout= .*, not True"),
        ({"max_output_bytes": 0}, r"max_output_bytes= takes a whole number .* not 0"),
        ({"max_output_bytes": 10**400}, r"max_output_bytes= .* not an integer of about 401"),
        ({"max_output_bytes": 4.5}, r"max_output_bytes= .* not 4\.5"),
        ({"ledger": 3}, r"ledger= takes a path, sqlite:///path or postgresql://"),
        ({"ledger": "mysql://x"}, r"mysql"),
    ],
)
def test_every_numeric_option_is_range_checked(
    tmp_path: Path, arguments: dict[str, Any], message: str
) -> None:
    """timeout=10**400 was an OverflowError; every option out of its range is a UsageError
    (or the ledger's own error) naming it, before any call."""
    calls: list[str] = []
    with pytest.raises(engine.EngineError) as e:
        engine.run(
            "sentinel",
            "VERDICT",
            calls.append,
            session=tmp_path / "s",
            prompt="p",
            **VERDICT,
            **arguments,
        )
    assert re.search(message, str(e.value)), str(e.value)
    assert calls == []


@pytest.mark.heavy
def test_ledger_and_rules_ledger_record_as_rules_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ledger_url: str
) -> None:
    """engine.run took no ledger= and ignored RULES_LEDGER: two `rules run` and two
    engine.run on one item kept two counts. Now the four runs, each continuing the item's
    run, are attempts 1..5 of one item (the first run's repair and its final attempt, then
    one final attempt each) in the one ledger the variable names (SQLite or PostgreSQL),
    and ledger= wins over the variable."""
    shared = ledger_url
    monkeypatch.setenv("RULES_LEDGER", str(shared))
    monkeypatch.chdir(tmp_path)
    junk = tmp_path / "junk.py"
    junk.write_text("print('no verdict here')\n", encoding="utf-8")
    args = [*VERDICT_ARGS, "--item", "one", "--continue", "--prompt", str(tmp_path / "p.txt")]
    (tmp_path / "p.txt").write_text(PROMPT, encoding="utf-8")
    for _ in range(2):
        run_script(script("rules"), "run", *args, "--", sys.executable, str(junk))
        engine.run(
            "sentinel",
            "VERDICT",
            lambda p: "no verdict here",
            prompt=PROMPT,
            item="one",
            timeout=10**3,
            continue_run=True,
            **VERDICT,
        )
    ledger = SessionLedger(locate(".rules-session", str(shared)))
    try:
        found = ledger.attempts()
    finally:
        ledger.close()
    # one item, one count: each run's attempts follow the previous run's (a run may make
    # more than one attempt: the pack retries an output that holds no block)
    assert len(found) >= 4
    assert [(r["item"], r["attempt"]) for r in found] == [
        (found[0]["item"], n) for n in range(1, len(found) + 1)
    ]
    assert not (tmp_path / ".rules-session" / "ledger.sqlite3").exists()
    other = tmp_path / "other.sqlite3"
    engine.run(
        "sentinel",
        "VERDICT",
        lambda p: "no verdict here",
        prompt=PROMPT,
        item="one",
        ledger=other,
        **VERDICT,
    )
    ledger = SessionLedger(locate(".rules-session", str(other)))
    try:
        numbers = [r["attempt"] for r in ledger.attempts()]
        assert numbers == list(range(1, len(numbers) + 1))  # a count of its own, from 1
    finally:
        ledger.close()
