"""Model calls governed (`model_calls:`): failures classified by the pack's rules and the
engine's defaults, retried at the transport without spending a repair, usage read or
estimated and priced per attempt, for `engine.run`, `engine.arun` and `rules run`."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import FIXTURES, run_cli, run_script, script
from engine.ledger.store import SessionLedger, locate
from engine.policy.calls.replies import reported_usage
from engine.policy.calls.runtime import (
    NO_CALLS,
    TransportRetry,
    exception_failure,
    retry_after,
)
from engine.session import callable as calls_module
from engine.session.run import Waits

PACK = FIXTURES / "packs" / "model_calls"
GOOD = '{"answer": "42"}'
DECLARED = frozenset(["MODEL_TIMEOUT", "MODEL_RATE_LIMITED", "MODEL_UNAVAILABLE", "MODEL_ERROR"])


def rows(session: Path) -> list[dict[str, Any]]:
    ledger = SessionLedger(locate(session))
    try:
        return ledger.attempts()
    finally:
        ledger.close()


# ------------------------------------------------------------------ shapes, duck-typed


class _Headers(dict[str, str]):
    pass


class _Response:
    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status_code = status
        self.headers = _Headers(headers)


class APIStatusError(Exception):  # the shape of openai's and anthropic's
    def __init__(self, message: str, status: int, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.response = _Response(status, headers or {})
        self.status_code = status


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


class APIConnectionError(Exception):
    pass


class APITimeoutError(APIConnectionError):
    pass


class TimeoutException(Exception):  # httpx's base of ReadTimeout, ConnectTimeout...
    pass


class ReadTimeout(TimeoutException):
    pass


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (RateLimitError("slow down", 429, {"retry-after": "2"}), "MODEL_RATE_LIMITED"),
        (InternalServerError("oops", 500), "MODEL_UNAVAILABLE"),
        (APIStatusError("overloaded", 529), "MODEL_UNAVAILABLE"),
        (APIStatusError("bad request", 400), "MODEL_ERROR"),
        (APIStatusError("timeout", 408), "MODEL_TIMEOUT"),
        (APITimeoutError("timed out"), "MODEL_TIMEOUT"),
        (APIConnectionError("connection refused"), "MODEL_UNAVAILABLE"),
        (ReadTimeout("read"), "MODEL_TIMEOUT"),
        (TimeoutError(), "MODEL_TIMEOUT"),
        (ConnectionResetError(), "MODEL_UNAVAILABLE"),
        (RuntimeError("rate limited 429"), "EXECUTION_FAILED"),
        (ValueError("no"), "EXECUTION_FAILED"),
    ],
)
def test_the_defaults_recognise_client_exceptions_by_their_shape(
    exc: Exception, expected: str
) -> None:
    failure = exception_failure(exc, str(exc))
    assert NO_CALLS.classify(failure, DECLARED) == expected


def test_a_type_the_pack_does_not_declare_stays_execution_failed() -> None:
    failure = exception_failure(RateLimitError("x", 429), "x")
    assert NO_CALLS.classify(failure, {"EXECUTION_FAILED"}) == "EXECUTION_FAILED"


def test_retry_after_is_read_in_seconds_milliseconds_or_as_a_date() -> None:
    from datetime import datetime, timezone

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "Thu, 01 Jan 2026 00:00:07 GMT"}, now) == 7.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after(None) is None
    exc = RateLimitError("x", 429, {"retry-after": "1"})
    assert exception_failure(exc, "x").retry_after == 1.0


def test_the_backoff_grows_is_jittered_and_honours_retry_after_within_the_ceiling() -> None:
    retry = TransportRetry(frozenset({"MODEL_UNAVAILABLE"}), 3, 1.0, 2.0, 0.5, 3.0)
    top = [retry.delay("MODEL_UNAVAILABLE", n, None, lambda: 0.0) for n in range(4)]
    assert top == [1.0, 2.0, 3.0, None]  # doubles, bounded by the ceiling, then no more
    assert retry.delay("MODEL_UNAVAILABLE", 0, None, lambda: 1.0) == 0.5  # half jittered off
    assert retry.delay("MODEL_UNAVAILABLE", 0, 2.5, lambda: 1.0) == 2.5  # as asked
    assert retry.delay("MODEL_UNAVAILABLE", 0, 30.0, lambda: 1.0) is None  # past the ceiling
    assert retry.delay("MODEL_ERROR", 0, None, lambda: 1.0) is None  # not declared


def test_a_command_reports_its_usage_on_a_stderr_line() -> None:
    usage, asked = reported_usage(
        'noise\nrules-usage: {"input_tokens": 12, "output_tokens": 3, "model": "m"}\n',
        "rules-usage:",
    )
    assert (usage.tokens_in, usage.tokens_out, usage.model, asked) == (12, 3, "m", None)
    usage, asked = reported_usage('rules-usage: {"retry_after": 2}', "rules-usage:")
    assert not usage.known and asked == 2.0
    assert not reported_usage("rules-usage: [1, 2]", "rules-usage:")[0].known
    assert not reported_usage("rules-usage: {bad", "rules-usage:")[0].known


# -------------------------------------------------------------------- engine.run loop


class _Clock:
    """A controlled clock: records each wait instead of sleeping."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    controlled = _Clock()
    monkeypatch.setattr(calls_module, "WAITS", Waits(controlled.sleep, lambda: 0.0))
    return controlled


def _scripted(*answers: Any) -> Any:
    queue = list(answers)

    def call(prompt: str) -> Any:
        value = queue.pop(0)
        if isinstance(value, BaseException):
            raise value
        return value

    return call


def test_transport_retries_resend_the_prompt_and_spend_no_repair(
    tmp_path: Path, clock: _Clock
) -> None:
    prompts: list[str] = []
    scripted = _scripted(
        RateLimitError("slow down", 429, {"retry-after": "0.2"}),
        InternalServerError("down", 503),
        "not json",
        engine.ModelReply(GOOD, tokens_in=120, tokens_out=8, model="stub-model-2026"),
    )

    def call(prompt: str) -> Any:
        prompts.append(prompt)
        return scripted(prompt)

    result = engine.run(PACK, "answer", call, session=tmp_path / "s", prompt="Answer.")
    assert result.decision.action == "PROCEED"
    assert prompts[:3] == ["Answer."] * 3  # a transport retry never changes the prompt
    assert prompts[3] != "Answer."  # the repair prompt
    assert clock.waits == [0.2, 0.1]  # Retry-After honoured; then the backoff (0.05 * 2)
    found = rows(tmp_path / "s")
    assert [(r["attempt"], r["kind"], r["failure_type"], r["rule"]) for r in found] == [
        (1, "first", "MODEL_RATE_LIMITED", "transport-retry"),
        (1, "transport_retry", "MODEL_UNAVAILABLE", "transport-retry"),
        (1, "transport_retry", "PARSE_ERROR", "attempt:1"),
        (2, "repair", None, "pass"),
    ]
    assert [r["final"] for r in found] == [False, False, False, True]
    failed, _, malformed, repaired = found
    assert failed["tokens_in"] is None and failed["cost"] is None  # nothing is known
    # no usage reported: estimated from the characters (4 a token), and marked so
    assert (malformed["tokens_in"], malformed["tokens_out"]) == (2, 2)
    assert malformed["tokens_estimated"] is True
    # reported usage, priced by the longest pricing name the model's name starts with
    assert (repaired["tokens_in"], repaired["tokens_out"]) == (120, 8)
    assert repaired["tokens_estimated"] is False
    assert repaired["model"] is None  # the request named no model; the reply did
    assert repaired["cost"] == pytest.approx((120 * 2.0 + 8 * 8.0) / 1_000_000)


def test_retries_run_out_and_the_pack_decides_the_failure(tmp_path: Path, clock: _Clock) -> None:
    errors = [InternalServerError("down", 503) for _ in range(3)]
    result = engine.run(PACK, "answer", _scripted(*errors), session=tmp_path / "s", prompt="p")
    assert result.verdict.failure_type == "MODEL_UNAVAILABLE"
    assert result.decision.action == "NEEDS_HUMAN"  # not retriable: the after-failure action
    assert result.decision.rule == "not-retriable"
    assert len(clock.waits) == 2  # max_retries: 2
    assert [r["kind"] for r in rows(tmp_path / "s")] == [
        "first",
        "transport_retry",
        "transport_retry",
    ]


def test_a_retry_after_past_the_ceiling_is_not_waited_for(tmp_path: Path, clock: _Clock) -> None:
    call = _scripted(RateLimitError("later", 429, {"retry-after": "600"}))
    result = engine.run(PACK, "answer", call, session=tmp_path / "s", prompt="p")
    assert result.verdict.failure_type == "MODEL_RATE_LIMITED"
    assert result.decision.final and clock.waits == []


def test_arun_waits_without_holding_the_event_loop(tmp_path: Path) -> None:
    queue: list[Any] = [TimeoutError("slow"), GOOD]

    async def call(prompt: str) -> str:
        value = queue.pop(0)
        if isinstance(value, BaseException):
            raise value
        return str(value)

    async def main() -> tuple[engine.RunResult, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        task = asyncio.create_task(ticker())
        result = await engine.arun(PACK, "answer", call, session=tmp_path / "a", prompt="p")
        task.cancel()
        return result, ticks

    result, ticks = asyncio.run(main())
    assert result.decision.action == "PROCEED"
    assert ticks >= 3  # the loop ran while the retry waited (0.025 s to 0.05 s)
    assert [r["kind"] for r in rows(tmp_path / "a")] == ["first", "transport_retry"]


class _ChatCompletion:
    """The shape of an OpenAI ChatCompletion."""

    object = "chat.completion"
    model = "stub-model"

    class _Message:
        content = GOOD

    class _Choice:
        pass

    class _Usage:
        prompt_tokens = 50
        completion_tokens = 5

    def __init__(self) -> None:
        choice = self._Choice()
        choice.message = self._Message()  # type: ignore[attr-defined]
        self.choices = [choice]
        self.usage = self._Usage()


class _Message:
    """The shape of an Anthropic Message."""

    type = "message"
    model = "stub-model"

    class _Block:
        type = "text"
        text = GOOD

    class _Usage:
        input_tokens = 40
        output_tokens = 4

    def __init__(self) -> None:
        self.content = [self._Block()]
        self.usage = self._Usage()


class _ResponsesObject:
    """The shape of an OpenAI Responses object."""

    object = "response"
    model = "stub-model"
    output = ()
    output_text = GOOD

    class _Usage:
        input_tokens = 30
        output_tokens = 3

    usage = _Usage()


@pytest.mark.parametrize(
    ("reply", "tokens"),
    [(_ChatCompletion(), (50, 5)), (_Message(), (40, 4)), (_ResponsesObject(), (30, 3))],
)
def test_sdk_responses_are_read_for_their_text_and_usage(
    tmp_path: Path, reply: Any, tokens: tuple[int, int]
) -> None:
    result = engine.run(PACK, "answer", lambda p: reply, session=tmp_path / "s", prompt="p")
    assert result.decision.action == "PROCEED" and result.verdict.data == {"answer": "42"}
    [row] = rows(tmp_path / "s")
    assert (row["tokens_in"], row["tokens_out"], row["tokens_estimated"]) == (*tokens, False)
    assert row["cost"] == pytest.approx((tokens[0] * 2 + tokens[1] * 8) / 1e6)


def test_a_reply_shape_without_text_is_a_failed_call(tmp_path: Path) -> None:
    empty = _ChatCompletion()
    empty.choices = []
    result = engine.run(PACK, "answer", lambda p: empty, session=tmp_path / "s", prompt="p")
    assert result.verdict.failure_type == "EXECUTION_FAILED"
    assert result.verdict.error == (
        "model call returned a _ChatCompletion without text: the completion has no choices"
    )


# ------------------------------------------------------------------------ rules run


MODEL = """
import json, os, sys
prompt = sys.stdin.read()
state = os.path.join(os.environ["STATE"], "calls")
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
if n == 0:
    print("Error: quota exceeded, try later", file=sys.stderr)
    sys.exit(1)
if n == 1:
    sys.exit(75)
print('{"answer": "42"}')
print('rules-usage: ' + json.dumps({"input_tokens": 99, "output_tokens": 7,
      "model": "stub-model"}), file=sys.stderr)
"""


@pytest.mark.heavy
def test_rules_run_classifies_a_command_by_stderr_and_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    (tmp_path / "prompt.txt").write_text("Answer.")
    monkeypatch.setenv("STATE", str(tmp_path))
    done = run_script(
        script("rules"),
        "run",
        "--pack",
        str(PACK),
        "--block",
        "answer",
        "--session",
        str(tmp_path / "s"),
        "--prompt",
        str(tmp_path / "prompt.txt"),
        "--",
        sys.executable,
        str(model),
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == {"answer": "42"}
    found = rows(tmp_path / "s")
    assert [(r["attempt"], r["kind"], r["failure_type"]) for r in found] == [
        (1, "first", "MODEL_RATE_LIMITED"),  # the pack's stderr pattern
        (1, "transport_retry", "MODEL_UNAVAILABLE"),  # the pack's exit status
        (1, "transport_retry", None),
    ]
    last = found[-1]
    assert (last["tokens_in"], last["tokens_out"], last["tokens_estimated"]) == (99, 7, False)
    assert last["cost"] == pytest.approx((99 * 2 + 7 * 8) / 1e6)


# ------------------------------------------------------------- what shows the usage


def _repaired_session(tmp_path: Path, clock: _Clock) -> Path:
    """A session of four attempts: rate limited, unavailable, malformed, repaired."""
    call = _scripted(
        RateLimitError("slow down", 429),
        InternalServerError("down", 503),
        engine.ModelReply("not json", 40, 5, "stub-model"),
        engine.ModelReply(GOOD, 120, 8, "stub-model"),
    )
    session = tmp_path / "s"
    assert engine.run(PACK, "answer", call, session=session, prompt="p").decision.final
    return session


def test_rules_log_shows_usage_by_kind_of_attempt(tmp_path: Path, clock: _Clock) -> None:
    session = _repaired_session(tmp_path, clock)
    shown = run_cli("log", "--session", str(session), "--view", "usage")
    assert shown.exit_code == 0, shown.output
    assert "| repair | 1 | 120 | 8 | 0 | 0.000304 |" in shown.output
    assert "| transport_retry | 2 | 40 | 5 | 0 | 0.000120 |" in shown.output
    assert "| total | 4 | 160 | 13 | 0 | 0.000424 |" in shown.output
    figures = json.loads(
        run_cli("log", "--session", str(session), "--view", "usage", "--format", "json").output
    )
    assert figures["usage"]["repair"]["cost"] == pytest.approx(0.000304)
    every = json.loads(run_cli("log", "--session", str(session), "--format", "json").output)
    kinds = [row["kind"] for row in every]
    assert kinds == ["first", "transport_retry", "transport_retry", "repair"]


def test_the_session_page_shows_usage_by_kind(tmp_path: Path, clock: _Clock) -> None:
    session = _repaired_session(tmp_path, clock)
    page = run_cli("report", "--session", str(session)).output
    assert "transport_retry" in page and "0.000304" in page
    assert "tokens and money are not recorded" not in page


def test_the_session_route_records_usage_and_counts_it_in_the_metrics(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    config = ServerSettings(packs=(str(PACK),), sessions_dir=str(tmp_path / "sessions"))
    request = {"pack": "model-calls", "block": "answer", "item": "q1"}
    with TestClient(create_app(config, load_pack_set(config.packs))) as http:
        bad = http.post(
            "/v1/sessions/s1/outputs",
            json={**request, "output": "nope", "usage": {"tokens_in": 50, "tokens_out": 4}},
        )
        good = http.post(
            "/v1/sessions/s1/outputs",
            json={
                **request,
                "output": GOOD,
                "model": "stub-model",
                "usage": {"tokens_in": 70, "tokens_out": 6},
            },
        )
        refused = http.post(
            "/v1/sessions/s1/outputs", json={**request, "output": GOOD, "usage": {"tokens_in": -1}}
        )
        metrics = http.get("/metrics").text
        schema = http.get("/openapi.json").json()
    assert bad.status_code == good.status_code == 200
    assert good.json()["decision"]["action"] == "PROCEED"
    assert refused.status_code == 422
    found = rows(tmp_path / "sessions" / "s1")
    assert [(r["kind"], r["tokens_in"], r["tokens_out"]) for r in found] == [
        ("first", 50, 4),
        ("repair", 70, 6),
    ]
    assert found[0]["cost"] is None  # no model named: no price
    assert found[1]["cost"] == pytest.approx((70 * 2 + 6 * 8) / 1e6)
    labels = 'block="answer",direction="in",estimated="false",kind="repair",pack="model-calls"'
    assert f"rules_model_tokens_total{{{labels}}} 70.0" in metrics
    assert 'rules_model_cost_total{block="answer",kind="repair",pack="model-calls"}' in metrics
    assert "UsageRequest" in schema["components"]["schemas"]


def test_the_evaluation_spans_carry_the_usage(tmp_path: Path, clock: _Clock) -> None:
    pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
    from test_telemetry import spans

    recorder = spans.__wrapped__()  # type: ignore[attr-defined]
    exporter = next(recorder)
    try:
        _repaired_session(tmp_path, clock)
        finished = [
            dict(s.attributes or {})
            for s in exporter.get_finished_spans()
            if s.name == "rules.evaluate"
        ]
    finally:
        recorder.close()
    assert [a["rules.attempt.kind"] for a in finished] == [
        "first",
        "transport_retry",
        "transport_retry",
        "repair",
    ]
    assert "gen_ai.usage.input_tokens" not in finished[0]  # a failed call: nothing known
    repaired = finished[-1]
    assert (repaired["gen_ai.usage.input_tokens"], repaired["gen_ai.usage.output_tokens"]) == (
        120,
        8,
    )
    assert repaired["gen_ai.response.model"] == "stub-model"
    assert repaired["rules.usage.estimated"] is False
    assert repaired["rules.usage.cost"] == pytest.approx(0.000304)


def test_transport_retries_count_the_same_on_sqlite_and_postgresql(
    tmp_path: Path, clock: _Clock, ledger_url: str
) -> None:
    """The retried try gives its number back in the ledger's counter, and the cost column
    holds a real, on both backends."""
    call = _scripted(
        InternalServerError("down", 503),
        engine.ModelReply("not json", 40, 5, "stub-model"),
        engine.ModelReply(GOOD, 120, 8, "stub-model"),
    )
    result = engine.run(
        PACK, "answer", call, session="shared", ledger=ledger_url, item="q1", prompt="p"
    )
    assert result.decision.action == "PROCEED"
    ledger = SessionLedger(locate("shared", ledger_url))
    try:
        found = ledger.attempts()
    finally:
        ledger.close()
    assert [(r["attempt"], r["kind"]) for r in found] == [
        (1, "first"),
        (1, "transport_retry"),
        (2, "repair"),
    ]
    assert found[2]["cost"] == pytest.approx(0.000304)
    assert isinstance(found[2]["cost"], float)
    assert found[1]["tokens_estimated"] is False


def test_rules_check_names_where_model_calls_go_wrong(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "pack.yaml").write_text(
        "rulepack: mc\n"
        "version: 1.0.0\n"
        "extends: [builtin:core]\n"
        "contracts:\n"
        "  answer: {kind: text}\n"
        "model_calls:\n"
        "  classify:\n"
        "    - {type: MODEL_RATE_LIMITED, stderr: 'quota('}\n"
        "    - {type: NOPE, exit_status: [3]}\n"
        "    - {type: MODEL_ERROR}\n"
        "  retry: {on: [MODEL_RATE_LIMITED, PARSE_ERROR], initial: 100, ceiling: 10}\n"
        "  pricing:\n"
        "    m: {input: -1, output: 1}\n"
    )
    shown = run_cli("check", str(pack))
    assert shown.exit_code == 1
    found = shown.output
    assert "pack.yaml:10:7: [error] model_calls.classify[2]: a rule needs a matcher" in found
    assert "pack.yaml:11:10: [error] model_calls.retry: initial must be at most ceiling" in found
    assert "pack.yaml:13:16: [error] model_calls.pricing.m.input: Input should be" in found
    # once the model validates: the references and patterns, and a retry that never applies
    text = (pack / "pack.yaml").read_text()
    text = text.replace("    - {type: MODEL_ERROR}\n", "").replace("initial: 100", "initial: 1")
    (pack / "pack.yaml").write_text(text.replace("input: -1", "input: 1"))
    found = run_cli("check", str(pack)).output
    assert "pack.yaml:8:42: [error] pattern 'quota(' does not compile" in found
    assert "pack.yaml:9:14: [error] unknown failure type 'NOPE'" in found
    assert "pack.yaml:10:36: [error] 'PARSE_ERROR' is never the failure type" in found
    assert "(retry-never-applies)" in found


def test_the_packs_rules_come_before_the_defaults(tmp_path: Path, clock: _Clock) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    text = (pack / "pack.yaml").read_text()
    text = text.replace(
        "  classify:\n",
        "  classify:\n"
        "    - {type: MODEL_RATE_LIMITED, http_status: [503], retry_after: true}\n"
        "    - {type: MODEL_ERROR, exception: [ValueError], message: 'quota'}\n",
    )
    (pack / "pack.yaml").write_text(text)
    loaded = engine.load_pack(pack)
    calls = loaded.section("model_calls")
    declared = loaded.model.failure_types
    asked = InternalServerError("busy", 503, {"retry-after": "1"})
    assert calls.classify(exception_failure(asked, "busy"), declared) == "MODEL_RATE_LIMITED"
    plain = InternalServerError("busy", 503)
    assert calls.classify(exception_failure(plain, "busy"), declared) == "MODEL_UNAVAILABLE"
    quota = ValueError("quota spent")
    assert calls.classify(exception_failure(quota, "quota spent"), declared) == "MODEL_ERROR"
    other = ValueError("nope")
    assert calls.classify(exception_failure(other, "nope"), declared) == "EXECUTION_FAILED"


def test_a_hostile_reply_is_a_failed_call_not_a_traceback(tmp_path: Path) -> None:
    class Hostile:
        @property
        def usage(self) -> Any:
            raise RuntimeError("boom")

    class Tokens(int):  # a count that is not a plain int is not believed
        pass

    result = engine.run(PACK, "answer", lambda p: Hostile(), session=tmp_path / "h", prompt="p")
    assert result.verdict.failure_type == "EXECUTION_FAILED"
    assert result.verdict.error == (
        "model call returned a Hostile that cannot be read: RuntimeError raised"
    )
    reply = engine.ModelReply(GOOD, Tokens(5), -3, "stub-model")
    done = engine.run(PACK, "answer", lambda p: reply, session=tmp_path / "t", prompt="p")
    [row] = rows(tmp_path / "t")
    assert done.decision.action == "PROCEED"
    assert (row["tokens_in"], row["tokens_out"], row["tokens_estimated"]) == (1, 4, True)


def test_defaults_false_keeps_every_failed_call_execution_failed(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(PACK, pack)
    text = (pack / "pack.yaml").read_text()
    (pack / "pack.yaml").write_text(
        text.replace("model_calls:\n", "model_calls:\n  defaults: false\n")
    )
    call = _scripted(RateLimitError("slow down", 429))
    result = engine.run(pack, "answer", call, session=tmp_path / "s", prompt="p")
    assert result.verdict.failure_type == "EXECUTION_FAILED"
    assert result.decision.final
