"""GET /v1/budgets: a served pack's budgets against their limits and its breakers' states,
as `rules budgets` shows them."""

from __future__ import annotations

from typing import Any

from fastapi import Query, Request

from engine.core.errors import EngineError
from engine.server.documents import BudgetsDocument
from engine.server.evaluation import refused, served_pack
from engine.server.limits import within_time
from engine.server.problems import (
    INVALID_REQUEST,
    LEDGER_UNAVAILABLE,
    TIMEOUT,
    UNAUTHORIZED,
    UNKNOWN_PACK,
    Problem,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import api_router
from engine.session.budgets import BudgetsRequest, spending_report
from engine.session.recording import named_session
from engine.session.session_ref import session_name_problem

router = api_router("budgets")


@router.get(
    "/budgets",
    summary="A pack's budgets (spent, left) and breakers (state), as `rules budgets` shows",
    responses=route_responses(
        BudgetsDocument, UNAUTHORIZED, UNKNOWN_PACK, INVALID_REQUEST, LEDGER_UNAVAILABLE, TIMEOUT
    ),
)
async def budgets(
    request: Request,
    pack: str = Query(description="The served pack."),
    session: str | None = Query(
        None,
        description="The session whose own budgets are shown with the fleet's (needed when "
        "the server keeps each session in a folder of its own, without --ledger).",
    ),
) -> Document:
    settings = request.app.state.settings
    served = served_pack(request, pack)
    if session is None and settings.ledger is None:
        raise Problem(
            INVALID_REQUEST,
            "this server keeps each session in its own folder: name one with ?session=NAME",
            ["session"],
        )
    if session is not None and (problem := session_name_problem(session)):
        raise Problem(INVALID_REQUEST, f"session: {problem}", ["session"])
    where = named_session(session or "", ledger=settings.ledger, sessions_dir=settings.sessions_dir)

    def report() -> dict[str, Any]:
        try:
            return spending_report(served, BudgetsRequest(where))
        except EngineError as exc:
            raise refused(exc) from None

    return Document(await within_time(settings.timeout, report))
