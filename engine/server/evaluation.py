"""POST /v1/evaluate, /v1/render and /v1/sessions/{session}/outputs: one output evaluated
and decided through the API `rules eval` and `rules render` use."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import Path, Request

from engine.core.errors import EngineError, LedgerError, LedgerTimeout, ParamError
from engine.core.verdict import Verdict
from engine.pack.compiled import Pack
from engine.policy.calls.replies import NO_USAGE
from engine.policy.triggers.decide import Decision
from engine.server import metrics
from engine.server.documents import EvaluationDocument, RenderDocument, SessionOutputDocument
from engine.server.limits import runs_inline, within_time
from engine.server.models import EvaluateRequest, OutputRequest, SessionOutputRequest
from engine.server.problems import (
    BODY_TOO_LARGE,
    ENGINE_REFUSED,
    INVALID_REQUEST,
    LEDGER_UNAVAILABLE,
    MALFORMED_JSON,
    MISSING_INPUT,
    SESSION_PAUSED,
    TIMEOUT,
    UNAUTHORIZED,
    UNKNOWN_BLOCK,
    UNKNOWN_PACK,
    Problem,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import api_router
from engine.server.sessions import SESSION_NAME, session_lock, session_name_problem
from engine.server.settings import ServerSettings
from engine.session.choice_book import SessionPaused
from engine.session.evaluation import (
    ContextRefused,
    EvaluationRequest,
    MissingInputs,
    evaluate,
    render,
)
from engine.session.recording import named_session
from engine.session.session_ref import SessionRef

DecisionHook = Callable[[Pack, OutputRequest, Verdict, Decision], None]
"""Called after each decision with the pack, the request and the outcome; a hook must not
change the response (shadow evaluation of a candidate pack is one)."""

router = api_router("outputs")

COMMON_PROBLEMS = (
    MALFORMED_JSON,
    UNAUTHORIZED,
    BODY_TOO_LARGE,
    INVALID_REQUEST,
    UNKNOWN_PACK,
    UNKNOWN_BLOCK,
    MISSING_INPUT,
    ENGINE_REFUSED,
    TIMEOUT,
)


def about(pack: Pack) -> dict[str, str]:
    """The pack's name, version and revision, carried by every response."""
    return {"name": pack.name, "version": pack.model.version, "revision": pack.revision}


def served_pack(request: Request, name: str) -> Pack:
    pack: Pack | None = request.app.state.live.current.get(name)
    if pack is None:
        served = ", ".join(sorted(request.app.state.live.current.packs)) or "none"
        raise Problem(UNKNOWN_PACK, f"no pack {name!r} is served (served: {served})", ["pack"])
    return pack


def check_block(pack: Pack, block: str) -> None:
    """An UNKNOWN_BLOCK problem unless ``pack`` has ``block``."""
    if block not in pack.model.contracts:
        known = ", ".join(pack.model.contracts)
        raise Problem(
            UNKNOWN_BLOCK, f"pack {pack.name!r} has no block {block!r} (blocks: {known})", ["block"]
        )


def _request(
    body: OutputRequest, session: SessionRef | None = None, **counts: Any
) -> EvaluationRequest:
    """The request's output and inputs as the evaluation's input."""
    return EvaluationRequest(body.given(), session=session, **counts)


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A refusal of the use case as its problem document: the inputs a block needs (their
    request fields), a context that does not fit the pack, the ledger unavailable."""
    try:
        yield
    except MissingInputs as exc:
        raise Problem(MISSING_INPUT, exc.said(str), list(exc.fields)) from None
    except ParamError as exc:
        raise Problem(ENGINE_REFUSED, str(exc), [exc.field]) from None
    except ContextRefused as exc:
        raise Problem(ENGINE_REFUSED, str(exc), ["context"]) from None
    except EngineError as exc:
        raise refused(exc) from None


def refused(exc: EngineError, field: str | None = None) -> Problem:
    if isinstance(exc, LedgerTimeout):  # rolled back at the request's deadline
        return Problem(TIMEOUT, str(exc))
    if isinstance(exc, LedgerError):
        metrics.LEDGER_ERRORS.inc()
        return Problem(LEDGER_UNAVAILABLE, str(exc))
    return Problem(ENGINE_REFUSED, str(exc), [field] if field else [])


def decided(hooks: list[DecisionHook], pack: Pack, body: OutputRequest, evaluated: Any) -> None:
    """After a decision: count it (and a recorded attempt's usage), and call the app's
    decision hooks (shadow evaluation)."""
    metrics.count_decision(pack.name, evaluated.verdict, evaluated.decision)
    if getattr(evaluated, "usage", None) is not None:
        metrics.count_usage(
            pack.name, evaluated.verdict.block, evaluated.kind, evaluated.usage, evaluated.cost
        )
    for hook in hooks:
        hook(pack, body, evaluated.verdict, evaluated.decision)


def _evaluate(
    pack: Pack, body: EvaluateRequest, rendering: bool, hooks: list[DecisionHook]
) -> dict[str, Any]:
    check_block(pack, body.block)
    request = _request(body, attempt=body.attempt, previous_errors=tuple(body.previous_errors))
    if not rendering:
        with _refusals():
            evaluated = evaluate(pack, request)
        decided(hooks, pack, body, evaluated)
        return {
            "pack": about(pack),
            "verdict": evaluated.verdict.to_json(),
            "decision": evaluated.decision.to_json(),
        }
    with _refusals():
        rendered = render(pack, request, decided=lambda done: decided(hooks, pack, body, done))
    return {
        "pack": about(pack),
        "decision": rendered.evaluated.decision.to_json(),
        "prompt": rendered.prompt,
        "presentation": rendered.presentation,
        "warnings": rendered.warnings,
    }


def _output_route(path: str, summary: str, document: type[Any], rendering: bool) -> None:
    """The route ``path``: an output evaluated and decided, answered with ``document``, the
    verdict and decision (``rendering`` false) or the prompt the decision calls for (true)."""

    async def answer(request: Request, body: EvaluateRequest) -> Document:
        pack = served_pack(request, body.pack)
        answered = await within_time(
            request.app.state.settings.timeout,
            _evaluate,
            pack,
            body,
            rendering,
            request.app.state.decision_hooks,
            inline=runs_inline(body.output),
        )
        return Document(answered)

    router.add_api_route(
        path,
        answer,
        methods=["POST"],
        name=path.removeprefix("/"),
        summary=summary,
        responses=route_responses(document, *COMMON_PROBLEMS),
    )


_output_route(
    "/evaluate",
    "Evaluate one output: verdict and decision (`rules eval --format json`)",
    EvaluationDocument,
    rendering=False,
)
_output_route(
    "/render",
    "The prompt the decision calls for (`rules render`)",
    RenderDocument,
    rendering=True,
)


def _record(
    pack: Pack,
    settings: ServerSettings,
    name: str,
    body: SessionOutputRequest,
    hooks: list[DecisionHook],
) -> dict[str, Any]:
    check_block(pack, body.block)
    with session_lock(name), _refusals():
        try:
            session = named_session(
                name, ledger=settings.ledger, sessions_dir=settings.sessions_dir
            )
            usage = body.usage.usage() if body.usage is not None else NO_USAGE
            rendered = render(
                pack,
                _request(body, session, continue_run=body.continue_run, usage=usage),
                presentation=False,
                decided=lambda done: decided(hooks, pack, body, done),
            )
        except OSError as exc:
            metrics.LEDGER_ERRORS.inc()
            raise Problem(LEDGER_UNAVAILABLE, f"session {name!r}: {exc.strerror or exc}") from None
        except SessionPaused as exc:
            raise Problem(
                SESSION_PAUSED,
                f"session {name!r} was paused at {exc.paused_at} by a choice; resume it "
                "with `rules choose --resume`",
            ) from None
    evaluated = rendered.evaluated
    return {
        "pack": about(pack),
        "verdict": evaluated.verdict.to_json(),
        "decision": evaluated.decision.to_json(),
        "attempt": evaluated.decision.attempt,
        "attempt_id": evaluated.attempt_id,
        "prompt": rendered.prompt,
        "warnings": rendered.warnings,
        "review": None
        if evaluated.review is None
        else {
            "id": evaluated.review,
            "state": "open",
            "url": f"/v1/reviews/{name}/{evaluated.review}",
        },
    }


@router.post(
    "/sessions/{session}/outputs",
    summary="Evaluate, decide and record one output of a session; its prompt when one is due",
    responses=route_responses(
        SessionOutputDocument, *COMMON_PROBLEMS, SESSION_PAUSED, LEDGER_UNAVAILABLE
    ),
)
async def session_output(
    request: Request,
    body: SessionOutputRequest,
    session: str = Path(
        description="The session's name: 1 to 128 letters, digits, '.', '_' or '-', starting "
        "with a letter or digit.",
        pattern=SESSION_NAME.pattern,
    ),
) -> Document:
    if problem := session_name_problem(session):
        raise Problem(INVALID_REQUEST, f"session {session[:60]!r}: {problem}", ["session"])
    pack = served_pack(request, body.pack)
    settings = request.app.state.settings
    document = await within_time(
        settings.timeout,
        _record,
        pack,
        settings,
        session,
        body,
        request.app.state.decision_hooks,
        records=True,
    )
    return Document(document)
