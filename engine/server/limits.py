"""The bounds of a request: its body size and its time.

The body limit follows the served packs (``PackSet.body_limit``) and is checked on the
declared Content-Length and on the bytes actually received. The time limit (``--timeout``)
runs from the moment the request's head is read: a body that has not all arrived by then
is answered 408 and its connection closed; work still running at the limit is answered 503
(evaluation and rendering keep their own bounds). The limit is also the request's deadline
(``engine.core.deadline``), which the ledger keeps: a write commits before it or not at
all, and the route recording it waits for the write to end, so an answered error never
leaves a record behind. The head itself is bounded by the protocol
(``engine.server.protocol``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.core import deadline
from engine.server.middleware import HttpMiddleware
from engine.server.problems import (
    BODY_TOO_LARGE,
    REQUEST_TIMEOUT,
    TIMEOUT,
    Problem,
    ProblemType,
    problem_document,
)

T = TypeVar("T")


class BodyLimit(HttpMiddleware):
    """ASGI middleware: a request body over ``limit()`` bytes is answered 413, and one that
    has not all arrived within ``timeout`` seconds 408, before the application sees it;
    the request runs under its deadline, ``timeout`` seconds from its start."""

    def __init__(self, app: ASGIApp, limit: Callable[[], int], timeout: float) -> None:
        super().__init__(app)
        self.limit = limit
        self.timeout = timeout

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        with deadline.within(self.timeout):
            await self.bounded(scope, receive, send)

    async def bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.limit()
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await _too_large(send, limit)
            return
        chunks: list[bytes] = []
        size = 0
        try:
            with anyio.fail_after(self.timeout):
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
        except TimeoutError:
            await _refuse(
                send,
                REQUEST_TIMEOUT,
                f"the request body did not arrive within the time limit of {self.timeout:g} s "
                f"({size} bytes came)",
            )
            return
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
    await _refuse(
        send,
        BODY_TOO_LARGE,
        f"the body is over {limit} bytes (twice the packs' max_output_bytes)",
    )


async def _refuse(send: Send, kind: ProblemType, detail: str) -> None:
    """Answer ``kind`` and close the connection (the rest of the body is never read)."""
    payload = json.dumps(problem_document(kind, detail)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": kind.status,
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


SETTLE_SECONDS = 5.0
"""How long past its deadline a route that records waits for its write to end (the
ledger ends it by the deadline: this only guards against a connection that hangs)."""


async def within_time(
    seconds: float,
    work: Callable[..., T],
    *args: Any,
    inline: bool = False,
    records: bool = False,
) -> T:
    """``work(*args)`` in a worker thread, answered 503 when it takes over ``seconds`` or
    the request's deadline, whichever is sooner (the thread is left to finish: the
    engine's own bounds end it). ``inline``: small work (``runs_inline``) done at once in
    the event loop, bounded by the engine's own bounds. ``records``: the work writes to
    the ledger, which ends it by the deadline (a ``LedgerTimeout``, nothing written); the
    answer waits for it, so a 503 is never followed by a write that commits."""
    if inline:
        return work(*args)
    left = deadline.remaining()
    limit = seconds if left is None else max(0.0, min(seconds, left))
    try:
        if records:
            with deadline.within(limit), anyio.fail_after(limit + SETTLE_SECONDS):
                return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)
        with anyio.fail_after(limit):
            return await anyio.to_thread.run_sync(work, *args, abandon_on_cancel=True)
    except TimeoutError:
        raise Problem(TIMEOUT, f"the request took longer than its limit of {seconds:g} s") from None
