"""The ASGI application: routes, problem handlers, the body limit, request timing, and the
SIGHUP reload.

``RequestTiming`` wraps every request: its latency into the histogram and, where
OpenTelemetry is in use, its span (the parent of its evaluations' spans);
``app.state.decision_hooks`` are called after each decision with the pack, the
request and the outcome (shadow evaluation of a candidate pack hangs there).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.types import Receive, Scope, Send

from engine.core import telemetry
from engine.core.version import VERSION
from engine.server import admin, budgets, catalogue, evaluation, gate, metrics, reviews, shadow
from engine.server.access import AccessLog, TokenPlacement
from engine.server.documents import Problem as ProblemDocument
from engine.server.limits import BodyLimit
from engine.server.middleware import HttpMiddleware, ResponseStatus
from engine.server.packs import LivePacks, PackLoadFailed, PackSet
from engine.server.problems import TOKEN_MISPLACED, install_problem_handlers, problem_responses
from engine.server.settings import ServerSettings

log = logging.getLogger("rules.serve")

# FastAPI versions with telemetry of their own would add a second request span beside
# RequestTiming's, and log exception messages and stack traces: the server's spans are its own.
_NO_NATIVE_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


class RequestTiming(HttpMiddleware):
    """ASGI middleware: every request's latency into the histogram, by route template."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        sending = ResponseStatus(send)

        method = scope.get("method", "")
        try:
            if telemetry.enabled():  # one span per request, parent of its evaluations' spans
                headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
                with telemetry.request_span(method, "unmatched", headers) as span:
                    try:
                        await self.app(scope, receive, sending)
                    finally:  # the route is known once routed: the span is named after it
                        route = getattr(scope.get("route"), "path", None) or "unmatched"
                        telemetry.record_response(span, sending.code, route)
            else:
                await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            metrics.REQUESTS.labels(path, method, str(sending.code)).observe(
                time.perf_counter() - started
            )


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """SIGHUP reloads the packs (in the process that serves; uvicorn's supervisor, with
    --workers N, restarts its workers on SIGHUP instead)."""
    installed = False
    shadows = app.state.shadows
    if shadows is not None:
        shadows.start()
    if threading.current_thread() is threading.main_thread():
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, _reload_on_signal, app)
            installed = True
    try:
        yield
    finally:
        if installed:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        if shadows is not None:
            shadows.stop()


def _reload_on_signal(app: FastAPI) -> None:
    def work() -> None:
        with contextlib.suppress(PackLoadFailed):  # logged; the running packs keep serving
            admin.reload_packs(app.state.live)

    threading.Thread(target=work, name="rules-reload", daemon=True).start()


def _openapi(app: FastAPI) -> dict[str, Any]:
    if app.openapi_schema is None:
        schema = get_openapi(
            title="rules-engine",
            version=VERSION,
            description="The rule engine as a service: evaluate, decide, render and record "
            "model outputs with the served rulepacks (`rules serve`).",
            routes=app.routes,
        )
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas["Problem"] = ProblemDocument.model_json_schema()
        # every /v1 route needs it when the server has a --token-file
        schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        _document_token_placement(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _document_token_placement(schema: dict[str, Any]) -> None:
    """Every operation can answer 400 ``token-misplaced``: the ``TokenPlacement`` middleware
    refuses a credential outside ``Authorization`` before any route runs, so the answer is
    added to each operation here rather than to each route's own list."""
    misplaced = problem_responses(TOKEN_MISPLACED)[TOKEN_MISPLACED.status]
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue  # a path item's shared parameters, not an operation
            responses = operation.setdefault("responses", {})
            known = responses.get(str(TOKEN_MISPLACED.status))
            if known is None:
                responses[str(TOKEN_MISPLACED.status)] = dict(misplaced)
            elif TOKEN_MISPLACED.title not in known.get("description", ""):
                known["description"] = f"{known.get('description', '')}; {TOKEN_MISPLACED.title}"


def create_app(settings: ServerSettings, packs: PackSet) -> FastAPI:
    """The application serving ``packs`` with ``settings`` (packs loaded and checked)."""
    app = FastAPI(
        title="rules-engine",
        version=VERSION,
        lifespan=_lifespan,
        docs_url=None,
        redoc_url=None,
        **_NO_NATIVE_TELEMETRY,
    )
    app.state.settings = settings
    app.state.live = LivePacks(packs, settings.locked)
    app.state.decision_hooks = []
    app.state.shadows = None
    if settings.shadows:
        candidates = shadow.load_candidates(settings.shadows, packs, settings.locked)
        app.state.shadows = shadow.Shadows(candidates, shadow.default_ledger(settings))
        app.state.decision_hooks.append(app.state.shadows.hook)
    install_problem_handlers(app)
    app.include_router(evaluation.router)
    app.include_router(catalogue.router)
    app.include_router(gate.router)
    app.include_router(admin.router)
    app.include_router(shadow.router)
    app.include_router(budgets.router)
    app.include_router(reviews.router)
    app.include_router(reviews.pages)
    app.include_router(reviews.sign_in)
    app.add_middleware(
        BodyLimit, limit=lambda: app.state.live.current.body_limit(), timeout=settings.timeout
    )
    app.add_middleware(RequestTiming)
    app.add_middleware(TokenPlacement)  # before routing, the token check and any log
    app.add_middleware(AccessLog)  # outermost: every request's line, refusals included
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    return app
