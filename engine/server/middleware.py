"""The base of the server's ASGI middleware: HTTP requests are its work, every other
scope (the lifespan) passes straight to the application."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HttpMiddleware:
    """ASGI middleware whose ``http`` sees each HTTP request; other scopes pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class ResponseStatus:
    """A ``send`` that remembers the status the response started with: what a middleware
    that logs or measures a request reports (500 when the application never answered)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.code = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.code = message["status"]
        await self.send(message)
