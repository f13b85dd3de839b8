"""The HTTP protocol the server speaks: uvicorn's, with bounds on a request's head and a
drain that resets no connection.

Everything a client sends before the application sees a request is bounded here: the
request line and headers together (``MAX_HEAD_BYTES``), and their number
(``MAX_HEADERS``); over either, the client gets a 431 problem document and the connection
is closed, before more is read (uvicorn's httptools protocol buffered a 96 MB header whole).
The body is bounded by the application (``limits.BodyLimit``: its size and the time to
receive it).

On a graceful shutdown (SIGTERM, and the restart of each worker a reload by SIGHUP makes)
uvicorn closes idle keep-alive connections at once; a client that had just sent its next
request on one then sees the connection reset, not knowing whether the request was
recorded. Here an idle connection is kept open for ``DRAIN_SECONDS``: a request that
arrives meanwhile is answered, with ``Connection: close``, and the connection is closed
after its answer.
"""

from __future__ import annotations

import json
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.server.problems import HEADERS_TOO_LARGE, problem_document

MAX_HEAD_BYTES = 64 * 1024
"""The most bytes of a request line and headers together (h11's own default is 16 KiB)."""

MAX_HEADERS = 100
"""The most header fields of one request."""

DRAIN_SECONDS = 2.0
"""How long an idle keep-alive connection stays open once the server is shutting down."""


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that is over its bounds."""


def refusal(detail: str) -> bytes:
    """A whole 431 response closing the connection: a problem document saying ``detail``."""
    payload = json.dumps(problem_document(HEADERS_TOO_LARGE, detail)).encode()
    head = (
        f"HTTP/1.1 {HEADERS_TOO_LARGE.status} Request Header Fields Too Large\r\n"
        "content-type: application/problem+json\r\n"
        f"content-length: {len(payload)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


def protocol_options() -> dict[str, Any]:
    """uvicorn's options for this protocol (the head bound for h11 too, should uvicorn be
    told to use it)."""
    return {"http": BoundedHttpToolsProtocol, "h11_max_incomplete_event_size": MAX_HEAD_BYTES}


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the head bounded and a drain on shutdown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.heading = True  # between requests, or inside a request's head
        self.head_bytes = 0
        self.refused: str | None = None
        self.draining = False

    def data_received(self, data: bytes) -> None:
        if self.heading:
            room = MAX_HEAD_BYTES - self.head_bytes
            if len(data) > room:
                head, data = data[:room], data[room:]
                self.head_bytes += len(head)
                super().data_received(head)
                if self.transport.is_closing():
                    return
                if self.heading:  # the head goes on past its bound: read no further
                    self.refuse(f"the request line and headers are over {MAX_HEAD_BYTES} bytes")
                    return
            else:
                self.head_bytes += len(data)
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.heading = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= MAX_HEADERS:
            self.refused = f"the request has more than {MAX_HEADERS} header fields"
            raise _HeadRefused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self.heading = False
        self.head_bytes = 0
        super().on_headers_complete()
        if self.draining and self.cycle is not None:
            self.cycle.keep_alive = False  # answered, then closed

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.heading = True

    def send_400_response(self, msg: str) -> None:
        if self.refused is not None:  # the parser stopped on a callback of ours
            self.refuse(self.refused)
            return
        super().send_400_response(msg)

    def refuse(self, detail: str) -> None:
        self.logger.warning("request refused: %s", detail)
        self.transport.write(refusal(detail))
        self.transport.close()

    def shutdown(self) -> None:
        """Close the connection once idle: a request that arrives within
        ``DRAIN_SECONDS`` is answered first (with ``Connection: close``)."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return
        if self.draining:
            return
        self.draining = True
        self.loop.call_later(DRAIN_SECONDS, self.close_if_idle)

    def close_if_idle(self) -> None:
        if self.transport.is_closing():
            return
        idle = self.cycle is None or self.cycle.response_complete
        if idle and self.head_bytes == 0:  # no request begun: nothing is lost by closing
            self.transport.close()
            return
        if self.cycle is not None:  # a request is being answered: closed after it
            self.cycle.keep_alive = False
        self.loop.call_later(0.1, self.close_if_idle)
