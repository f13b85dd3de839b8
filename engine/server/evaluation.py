"""POST /v1/evaluate, /v1/render and /v1/sessions/{session}/outputs: one output evaluated
and decided through the API `rules eval` and `rules render` use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fastapi import APIRouter, Depends, Path, Request

from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES, too_large_message
from engine.core.verdict import Verdict
from engine.ledger.errors import LedgerError, LedgerTimeout
from engine.ledger.store import Place
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
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
from engine.server.security import require_token
from engine.server.sessions import (
    SESSION_NAME,
    open_session,
    session_lock,
    session_name_problem,
)
from engine.server.settings import ServerSettings
from engine.session.choices import ChoiceBook
from engine.session.evaluation import Evaluated, evaluate_output
from engine.session.session import Outcome, render_after

DecisionHook = Callable[[Pack, OutputRequest, Verdict, Decision], None]
"""Called after each decision with the pack, the request and the outcome; a hook must not
change the response (shadow evaluation of a candidate pack is one)."""

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)], tags=["outputs"])

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


def prepare(pack: Pack, body: OutputRequest) -> OutputInput:
    """The request's output and inputs, the block checked, the output capped at the pack's
    ``max_output_bytes`` (a bigger one is an OUTPUT_TOO_LARGE failure, as in the CLI), vars
    split into block params and context, the caller's required inputs checked."""
    check_block(pack, body.block)
    data = body.output.encode("utf-8", "surrogatepass")
    cap = pack.model.limits.max_output_bytes or MAX_OUTPUT_BYTES
    error, failure_type = body.error, body.failure_type
    if len(data) > cap:
        data, error, failure_type = data[:cap], too_large_message(cap), "OUTPUT_TOO_LARGE"
    try:
        variables, context = pack.split_inputs(body.block, body.context, body.vars)
    except EngineError as exc:
        raise Problem(ENGINE_REFUSED, str(exc), [getattr(exc, "field", "context")]) from None
    missing = pack.missing_inputs(body.block, body.nonce, variables) if error is None else []
    if missing:
        fields = [
            "nonce" if m == "--nonce" else "vars." + m.removeprefix("--var ").split("=")[0]
            for m in missing
        ]
        raise Problem(
            MISSING_INPUT,
            f"block {body.block!r} needs {' and '.join(fields)} (a caller's input, not the "
            "model's: nothing was evaluated)",
            fields,
        )
    return replace(
        body.given(),
        output=data,
        vars=variables,
        context=context,
        error=error,
        failure_type=failure_type,
    )


def due_prompt(
    pack: Pack, ready: OutputInput, result: Evaluated | Outcome, place: Place | None = None
) -> tuple[str | None, list[str]]:
    """The prompt ``result``'s decision calls for after ``ready`` and its warnings, or no
    prompt when none is due (``place``: the session's, whose ledger keeps the outputs of
    tier-2 examples)."""
    if result.decision.template is None:
        return None, []
    rendered = render_after(
        pack, result.verdict, result.decision, ready, result.user_context, place
    )
    return rendered.text, list(rendered.warnings)


def refused(exc: EngineError, field: str | None = None) -> Problem:
    if isinstance(exc, LedgerTimeout):  # rolled back at the request's deadline
        return Problem(TIMEOUT, str(exc))
    if isinstance(exc, LedgerError):
        metrics.LEDGER_ERRORS.inc()
        return Problem(LEDGER_UNAVAILABLE, str(exc))
    return Problem(ENGINE_REFUSED, str(exc), [field] if field else [])


def decided(hooks: list[DecisionHook], pack: Pack, body: OutputRequest, evaluated: Any) -> None:
    """After a decision: count it, and call the app's decision hooks (shadow evaluation)."""
    metrics.count_decision(pack.name, evaluated.verdict, evaluated.decision)
    for hook in hooks:
        hook(pack, body, evaluated.verdict, evaluated.decision)


def _evaluate(
    pack: Pack, body: EvaluateRequest, rendering: bool, hooks: list[DecisionHook]
) -> dict[str, Any]:
    ready = prepare(pack, body)
    try:
        evaluated = evaluate_output(
            pack, ready, attempt=body.attempt, previous_errors=tuple(body.previous_errors)
        )
        verdict, decision = evaluated.verdict, evaluated.decision
        decided(hooks, pack, body, evaluated)
        if not rendering:
            return {
                "pack": about(pack),
                "verdict": verdict.to_json(),
                "decision": decision.to_json(),
            }
        presents = decision.limit is not None and bool(decision.limit.get("presentation"))
        presentation = pack.present(verdict, decision, ready.context) if presents else None
        prompt, warnings = (None, []) if presents else due_prompt(pack, ready, evaluated)
    except EngineError as exc:
        raise refused(exc) from None
    return {
        "pack": about(pack),
        "decision": decision.to_json(),
        "prompt": prompt,
        "presentation": presentation,
        "warnings": warnings,
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
    ready = prepare(pack, body)
    with session_lock(name):
        try:
            with open_session(pack, settings, name) as session:
                place = session.place  # tier-2 examples read its kept outputs
                paused = ChoiceBook(session.ledger).paused()
                if paused is not None:
                    raise Problem(
                        SESSION_PAUSED,
                        f"session {name!r} was paused at {paused} by a choice; resume it "
                        "with `rules choose --resume`",
                    )
                outcome = session.evaluate(ready)
        except OSError as exc:
            metrics.LEDGER_ERRORS.inc()
            raise Problem(LEDGER_UNAVAILABLE, f"session {name!r}: {exc.strerror or exc}") from None
        except EngineError as exc:
            raise refused(exc) from None
    verdict, decision = outcome.verdict, outcome.decision
    decided(hooks, pack, body, outcome)
    try:
        prompt, warnings = due_prompt(pack, ready, outcome, place)
    except EngineError as exc:
        raise refused(exc) from None
    return {
        "pack": about(pack),
        "verdict": verdict.to_json(),
        "decision": decision.to_json(),
        "attempt": decision.attempt,
        "attempt_id": outcome.attempt_id,
        "prompt": prompt,
        "warnings": warnings,
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
