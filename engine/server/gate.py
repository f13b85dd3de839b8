"""POST /v1/gate: a pack's quality gate on JSON outputs, as `rules gate --format json`.

The request's ``stage`` and the result's ``stage`` key are the names `rules gate --stage`
and its JSON result use (contracts/gate-result.schema.json); inside the engine the gate's
name is just the gate.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import BaseModel, Field

from engine.core.errors import EngineError
from engine.pack.compiled import Pack
from engine.server.documents import PackAbout
from engine.server.evaluation import about, refused, served_pack
from engine.server.limits import within_time
from engine.server.models import STRICT
from engine.server.problems import (
    BODY_TOO_LARGE,
    ENGINE_REFUSED,
    INVALID_REQUEST,
    MALFORMED_JSON,
    TIMEOUT,
    UNAUTHORIZED,
    UNKNOWN_PACK,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import api_router
from engine.session import gate as gates

router = api_router("gates")


class GateRequest(BaseModel):
    """A quality gate's input, as `rules gate` takes it."""

    model_config = STRICT

    pack: str
    stage: str = Field(description="The gate: a name of the pack's `gates.steps` table.")
    outputs: list[Any] = Field(description="The JSON documents to check.")
    retry: int = Field(0, ge=0, le=1_000_000, description="Times this output was sent back.")
    context: dict[str, Any] = Field(default_factory=dict)
    vars: dict[str, str] = Field(default_factory=dict, description="Context keys as strings.")
    now: str | None = Field(None, description="Fix the clock, e.g. 2026-01-04T06:30:00Z.")


class GateDocument(BaseModel):
    pack: PackAbout
    stage: str
    valid: bool
    checked: list[Any]
    errors: list[Any]
    action: str
    retry: int
    reprompt: str | None
    artifact: Any


def _gate(pack: Pack, body: GateRequest) -> dict[str, Any]:
    # the request's fields in the use case's order: gate, outputs, retry, context, vars, now
    request = gates.GateRequest(
        body.stage, body.outputs, body.retry, body.context, body.vars, body.now
    )
    try:
        report = gates.run_gate(pack, request)
    except EngineError as exc:
        raise refused(exc) from None
    return {"pack": about(pack), **report.document}


@router.post(
    "/gate",
    summary="Run a quality gate on JSON outputs (`rules gate --format json`)",
    responses=route_responses(
        GateDocument,
        MALFORMED_JSON,
        UNAUTHORIZED,
        BODY_TOO_LARGE,
        INVALID_REQUEST,
        UNKNOWN_PACK,
        ENGINE_REFUSED,
        TIMEOUT,
    ),
)
async def gate(request: Request, body: GateRequest) -> Document:
    pack = served_pack(request, body.pack)
    document = await within_time(request.app.state.settings.timeout, _gate, pack, body)
    return Document(document)
