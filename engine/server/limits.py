"""The bounds of a request: its body size and its time.

The body limit follows the served packs (``PackSet.body_limit``) and is checked on the
declared Content-Length and on the bytes actually received; the time limit answers 503
when the work takes longer (evaluation, rendering and the ledger keep their own bounds).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.server.middleware import HttpMiddleware
from engine.server.problems import BODY_TOO_LARGE, TIMEOUT, Problem, problem_document

T = TypeVar("T")


class BodyLimit(HttpMiddleware):
    """ASGI middleware: a request body over ``limit()`` bytes is answered 413 before the
    application sees it."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int]) -> None:
        super().__init__(app)
        self.limit = limit

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(send, limit)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, limit: int) -> None:
    document = problem_document(
        BODY_TOO_LARGE, f"the body is over {limit} bytes (twice the packs' max_output_bytes)"
    )
    payload = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


INLINE_OUTPUT_CHARS = 16 * 1024
"""Outputs up to this many characters are evaluated and rendered on the event loop (the
engine takes well under a millisecond for them); larger ones in a worker thread."""


def runs_inline(output: str) -> bool:
    """Whether evaluating ``output`` is small work, done without a thread hop (the hop to a
    worker thread and back cost a quarter of a small decision's CPU time, and under
    concurrent clients the thread pool's hand-offs set its tail latency)."""
    return len(output) <= INLINE_OUTPUT_CHARS


async def within_time(
    seconds: float, work: Callable[..., T], *args: Any, inline: bool = False
) -> T:
    """``work(*args)`` in a worker thread, answered 503 when it takes over ``seconds`` (the
    thread is left to finish: the engine's own bounds end it). ``inline``: small work
    (``runs_inline``) done at once in the event loop, bounded by the engine's own bounds."""
    if inline:
        return work(*args)
    try:
        with anyio.fail_after(seconds):
            return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)
    except TimeoutError:
        raise Problem(TIMEOUT, f"the request took longer than its limit of {seconds:g} s") from None
