"""GET /healthz, /readyz, /metrics and POST /v1/admin/reload (also on SIGHUP)."""

from __future__ import annotations

import logging
import os
import signal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse

from engine.core.errors import LedgerError
from engine.server import metrics
from engine.server.documents import ReloadDocument
from engine.server.evaluation import about
from engine.server.limits import within_time
from engine.server.packs import LivePacks, PackLoadFailed
from engine.server.problems import (
    FORBIDDEN,
    NOT_READY,
    PACK_CHECK_FAILED,
    TIMEOUT,
    UNAUTHORIZED,
    Problem,
    problem_responses,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import require_admin
from engine.server.sessions import ready_problem
from engine.session.budgets import breaker_gauges
from engine.session.review_server import served_figures

router = APIRouter(tags=["operations"])
log = logging.getLogger("rules.serve")


@router.get("/healthz", summary="The process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The packs are loaded and the ledger is reachable",
    responses=problem_responses(NOT_READY),
)
async def readyz(request: Request) -> Document:
    settings = request.app.state.settings
    problem = await within_time(settings.timeout, ready_problem, settings)
    if problem is not None:
        metrics.LEDGER_ERRORS.inc()
        raise Problem(NOT_READY, problem)
    packs = request.app.state.live.current.packs
    return Document({"status": "ready", "packs": [about(p) for p in packs.values()]})


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format)",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def prometheus_metrics(request: Request) -> Response:
    body, content_type = metrics.exposition()
    settings = request.app.state.settings
    packs = request.app.state.live.current.packs.values()
    try:
        figures = await within_time(
            settings.timeout, served_figures, settings.ledger, settings.sessions_dir
        )
        breakers = await within_time(
            settings.timeout, breaker_gauges, packs, settings.ledger, settings.sessions_dir
        )
    except (LedgerError, Problem):  # the ledger unavailable: the other metrics still answer
        metrics.LEDGER_ERRORS.inc()
        return Response(body, media_type=content_type)
    body += metrics.review_exposition(figures) + metrics.breaker_exposition(breakers)
    return Response(body, media_type=content_type)


def reload_packs(live: LivePacks) -> dict[str, object]:
    """Reload every pack (the old set keeps serving when one fails: ``PackLoadFailed``)."""
    try:
        fresh = live.reload()
    except PackLoadFailed as exc:
        metrics.RELOADS.labels("refused").inc()
        log.warning("reload refused, the running packs keep serving:\n%s", exc.text())
        raise
    metrics.RELOADS.labels("done").inc()
    log.info(
        "packs reloaded: %s", ", ".join(f"{p.name}@{p.revision}" for p in fresh.packs.values())
    )
    return {"reloaded": True, "packs": [about(p) for p in fresh.packs.values()]}


@router.post(
    "/v1/admin/reload",
    dependencies=[Depends(require_admin)],
    summary="Reload every pack at once; a pack that fails its check is refused",
    responses=route_responses(ReloadDocument, UNAUTHORIZED, FORBIDDEN, PACK_CHECK_FAILED, TIMEOUT),
)
async def reload(request: Request) -> Document:
    try:
        document = await within_time(
            request.app.state.settings.timeout, reload_packs, request.app.state.live
        )
    except PackLoadFailed as exc:
        raise Problem(
            PACK_CHECK_FAILED,
            "a pack fails its check; the running revision keeps serving",
            extra={"packs": exc.to_json()},
        ) from None
    if request.app.state.settings.workers > 1:
        # The other workers reload by restarting: uvicorn's supervisor replaces each worker
        # on SIGHUP once its replacement has loaded the packs.
        os.kill(os.getppid(), signal.SIGHUP)
        document["workers"] = "restarting"
    return Document(document)
