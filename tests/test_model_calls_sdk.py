"""`engine.run` around the real `openai` and `anthropic` SDK clients, pointed at a stub
HTTP server on loopback that answers 429 with `Retry-After: 1`, then 503, then a
malformed answer, then a good one with usage: two transport retries (the first waits at
least 1 s, on the real clock), one repair, PROCEED; the ledger holds the four attempts
with their kinds, tokens and cost, and the session's figures report the repair's cost
apart from the first attempt's.

The SDKs retry by themselves; the clients here are made with ``max_retries=0``: the
engine's transport retry replaces the SDK's (retry amplification otherwise: each of the
engine's tries would be several of the SDK's)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import FIXTURES
from engine.ledger.store import SessionLedger, locate
from engine.session.summary import session_summary

PACK = FIXTURES / "packs" / "model_calls"
GOOD = '{"answer": "42"}'
MALFORMED = "the answer is 42"

Reply = tuple[int, dict[str, str], dict[str, Any]]


class _Stub:
    """A model server on 127.0.0.1 answering each request with the next scripted reply,
    noting when each request came."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.times: list[float] = []
        self.bodies: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                stub.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                stub.times.append(time.monotonic())
                status, headers, body = stub.replies.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def _script(good: Callable[[str, int, int], dict[str, Any]]) -> list[Reply]:
    return [
        (429, {"retry-after": "1"}, _error("rate_limit_error", "slow down")),
        (503, {}, _error("overloaded_error", "try later")),
        (200, {}, good(MALFORMED, 30, 6)),
        (200, {}, good(GOOD, 80, 7)),
    ]


def _chat_completion(text: str, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "stub-model-2026",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def _message(text: str, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "stub-model-2026",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
    }


def _openai_call(url: str) -> Callable[[str], Any]:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=url + "/v1", api_key="test-key", max_retries=0)

    def call(prompt: str) -> Any:
        return client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": prompt}]
        )

    return call


def _anthropic_call(url: str) -> Callable[[str], Any]:
    anthropic = pytest.importorskip("anthropic")
    client = anthropic.Anthropic(base_url=url, api_key="test-key", max_retries=0)

    def call(prompt: str) -> Any:
        return client.messages.create(
            model="stub-model", max_tokens=100, messages=[{"role": "user", "content": prompt}]
        )

    return call


@pytest.fixture(params=["openai", "anthropic"])
def sdk(request: pytest.FixtureRequest) -> Iterator[tuple[str, _Stub, Callable[[str], Any]]]:
    name = request.param
    good = _chat_completion if name == "openai" else _message
    with _Stub(_script(good)) as stub:
        maker = _openai_call if name == "openai" else _anthropic_call
        yield name, stub, maker(stub.url)


@pytest.mark.heavy
def test_an_sdk_client_is_retried_at_the_transport_and_repaired(
    tmp_path: Path, sdk: tuple[str, _Stub, Callable[[str], Any]]
) -> None:
    name, stub, call = sdk
    session = tmp_path / name
    result = engine.run(PACK, "answer", call, session=session, prompt="What is 6 x 7?")

    assert result.decision.action == "PROCEED"
    assert result.verdict.data == {"answer": "42"}
    assert len(stub.times) == 4  # the SDK retried nothing itself
    assert stub.times[1] - stub.times[0] >= 1.0  # Retry-After: 1, on the real clock
    prompts = [json.dumps(body["messages"]) for body in stub.bodies]
    assert prompts[0] == prompts[1] == prompts[2] != prompts[3]  # the repair's prompt

    ledger = SessionLedger(locate(session))
    try:
        found = ledger.attempts()
    finally:
        ledger.close()
    seen = [
        (r["attempt"], r["kind"], r["failure_type"], r["tokens_in"], r["tokens_out"]) for r in found
    ]
    assert seen == [
        (1, "first", "MODEL_RATE_LIMITED", None, None),
        (1, "transport_retry", "MODEL_UNAVAILABLE", None, None),
        (1, "transport_retry", "PARSE_ERROR", 30, 6),
        (2, "repair", None, 80, 7),
    ]
    assert [r["tokens_estimated"] for r in found] == [None, None, False, False]
    # stub-model's price (2.0 in, 8.0 out per million) for the model that answered
    costs = [r["cost"] for r in found]
    assert costs[:2] == [None, None]
    assert costs[2] == pytest.approx((30 * 2.0 + 6 * 8.0) / 1e6)
    assert costs[3] == pytest.approx((80 * 2.0 + 7 * 8.0) / 1e6)

    usage = session_summary(found).figures["usage"]
    assert usage["repair"]["cost"] == pytest.approx(costs[3])
    assert usage["repair"]["attempts"] == 1
    assert usage["transport_retry"]["attempts"] == 2
    assert usage["transport_retry"]["cost"] == pytest.approx(costs[2])
    assert usage["first"] == {
        "attempts": 1,
        "tokens_in": 0,
        "tokens_out": 0,
        "estimated": 0,
        "cost": 0.0,
    }
