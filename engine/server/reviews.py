"""The review queue over HTTP: the routes under ``/v1/reviews`` (JSON, in the OpenAPI
document) and the page ``/review`` (server-rendered HTML, no script, nothing loaded from
the network). Both need the server's token as every ``/v1`` route does; they call the
review use cases (``engine.session.review_server``) and return their documents.

A form of the page posts back to the page's own URL; a form posted from another origin
(its ``Origin`` header naming another host) is refused, so a page elsewhere cannot make a
person's browser resolve a review.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, Field

from engine.core.errors import EngineError, LedgerError
from engine.pack.compiled import Pack
from engine.report.reviews import queue_page, review_page
from engine.server import metrics
from engine.server.evaluation import refused
from engine.server.limits import within_time
from engine.server.models import STRICT
from engine.server.problems import (
    BODY_TOO_LARGE,
    FORBIDDEN,
    INVALID_REQUEST,
    LEDGER_UNAVAILABLE,
    MALFORMED_JSON,
    REVIEW_NOT_FOUND,
    REVIEW_REFUSED,
    REVIEW_TAKEN,
    TIMEOUT,
    UNAUTHORIZED,
    Problem,
    problem_responses,
)
from engine.server.responses import Document
from engine.server.security import (
    PAGE_COOKIE,
    api_router,
    page_pass,
    require_page_access,
    token_matches,
)
from engine.server.sessions import SESSION_NAME
from engine.session.review import (
    DEFAULT_CLAIM_SECONDS,
    STATES,
    OutputRefused,
    Resolution,
    ReviewRefused,
)
from engine.session.review_server import ServedReviews, served_figures, served_reviews

PROBLEMS = (
    MALFORMED_JSON,
    BODY_TOO_LARGE,
    INVALID_REQUEST,
    UNAUTHORIZED,
    REVIEW_NOT_FOUND,
    REVIEW_TAKEN,
    REVIEW_REFUSED,
    LEDGER_UNAVAILABLE,
    TIMEOUT,
)
router = api_router("reviews", problem_responses(*PROBLEMS))
pages = APIRouter(dependencies=[Depends(require_page_access)])
"""The /review pages: the token as for the API, or the cookie of the page's sign-in."""
sign_in = APIRouter()
"""The sign-in page, open to all: a browser sends no bearer header, so a person gives the
token once in a form and the pages then take the cookie it sets."""

MAX_FORM_BYTES = 80 * 1024 * 1024


class ClaimRequest(BaseModel):
    model_config = STRICT

    by: str = Field(description="Who claims the review.", min_length=1, max_length=200)
    seconds: int = Field(
        DEFAULT_CLAIM_SECONDS, ge=1, le=86_400, description="How long the claim holds."
    )


class ResolveRequest(BaseModel):
    model_config = STRICT

    by: str = Field(description="Who resolves the review (recorded).", min_length=1, max_length=200)
    reason: str | None = Field(None, max_length=2000, description="Why (needed to reject).")


class EditRequest(ResolveRequest):
    output: str = Field(description="The corrected output; it must pass the block's contract.")


class CheckRequest(BaseModel):
    model_config = STRICT

    output: str = Field(description="A draft of the corrected output to check.")


STATE_QUERY = Query(default=["open", "claimed"], description="The states to list.")
ReviewPath = Path(description="The review's id in its session.", ge=1, le=2**63 - 1)
SessionPath = Path(
    description="The session's name: 1 to 128 letters, digits, '.', '_' or '-'.",
    pattern=SESSION_NAME.pattern,
)


@dataclass(frozen=True)
class ReviewAt:
    """The review a route's path names: its session and its id there."""

    session: str
    review: int


def _review_at(session: str = SessionPath, review: int = ReviewPath) -> ReviewAt:
    return ReviewAt(session, review)


AT = Depends(_review_at)


@contextlib.contextmanager
def _answers() -> Iterator[None]:
    """A refusal of a review use case as its problem document."""
    try:
        yield
    except ReviewRefused as exc:
        kind = {"not-found": REVIEW_NOT_FOUND, "invalid": REVIEW_REFUSED}.get(
            exc.kind, REVIEW_TAKEN
        )
        extra: dict[str, Any] = {}
        if isinstance(exc, OutputRefused):
            extra["verdict"] = exc.verdict.to_json()
        raise Problem(kind, str(exc), extra=extra) from None
    except LedgerError as exc:
        raise refused(exc) from None
    except OSError as exc:
        metrics.LEDGER_ERRORS.inc()
        raise Problem(LEDGER_UNAVAILABLE, f"{exc.strerror or exc}") from None
    except EngineError as exc:
        raise Problem(REVIEW_REFUSED, str(exc)) from None


def _served(request: Request, session: str) -> ServedReviews:
    settings = request.app.state.settings
    with _answers():
        return ServedReviews(session, ledger=settings.ledger, sessions_dir=settings.sessions_dir)


def _pack(request: Request, name: str) -> Pack | None:
    found: Pack | None = request.app.state.live.current.get(name)
    return found


async def _run(request: Request, work: Any, *args: Any) -> Any:
    """``work(*args)`` within the request's time limit, its refusals as problems."""

    def guarded() -> Any:
        with _answers():
            return work(*args)

    return await within_time(request.app.state.settings.timeout, guarded, records=True)


# ---------------------------------------------------------------------------------- API


@router.get(
    "/reviews",
    summary="The reviews waiting for a person across the server's sessions, oldest first",
)
async def reviews(
    request: Request,
    state: list[Literal["open", "claimed", "resolved"]] = STATE_QUERY,
) -> Document:
    settings = request.app.state.settings
    found = await _run(request, served_reviews, settings.ledger, settings.sessions_dir, state)
    return Document({"reviews": found})


@router.get(
    "/reviews/{session}/{review}",
    summary="One review: its attempts with their outputs, failures and prompts; its state",
)
async def review(request: Request, at: ReviewAt = AT) -> Document:
    return Document(await _run(request, lambda: _served(request, at.session).show(at.review)))


@router.post(
    "/reviews/{session}/{review}/claim",
    summary="Claim a review (of many claiming at once exactly one gets it; the others 409)",
)
async def claim(request: Request, body: ClaimRequest, at: ReviewAt = AT) -> Document:
    served = _served(request, at.session)
    return Document(await _run(request, served.claim, at.review, body.by, body.seconds))


@router.post("/reviews/{session}/{review}/release", summary="Give a claim back")
async def release(request: Request, body: ResolveRequest, at: ReviewAt = AT) -> Document:
    served = _served(request, at.session)
    return Document(await _run(request, served.release, at.review, body.by))


@router.post(
    "/reviews/{session}/{review}/check",
    summary="Check a draft of the corrected output against the block's contract",
)
async def check(request: Request, body: CheckRequest, at: ReviewAt = AT) -> Document:
    served = _served(request, at.session)

    def work() -> dict[str, Any]:
        found = served.show(at.review)
        pack = _pack(request, str(found["pack"]))
        if pack is None:
            raise ReviewRefused("invalid", f"pack {found['pack']!r} is not served")
        return {"verdict": served.check(pack, at.review, body.output)}

    return Document(await _run(request, work))


def _resolution_route(
    kind: str, body_model: type[ResolveRequest]
) -> Callable[..., Awaitable[Document]]:
    """The route resolving a review as ``kind``; an edit is checked with the review's
    served pack."""

    async def resolve(request: Request, body: ResolveRequest, at: ReviewAt = AT) -> Document:
        served = _served(request, at.session)
        resolution = Resolution(kind, body.by, getattr(body, "output", None), body.reason)

        def work() -> dict[str, Any]:
            found = served.show(at.review)
            pack = _pack(request, str(found["pack"]))  # its webhook is told of the resolution
            if pack is None and kind == "edited":
                raise ReviewRefused("invalid", f"pack {found['pack']!r} is not served")
            return served.resolve(pack, at.review, resolution)

        return Document(await _run(request, work))

    # FastAPI reads the body's model from the annotation: an edit's carries the output.
    resolve.__annotations__["body"] = body_model
    return resolve


RESOLUTIONS = (
    ("approve", "approved", ResolveRequest, "Approve: the item's last output stands (PROCEED)"),
    (
        "edit",
        "edited",
        EditRequest,
        "Edit: a corrected output, which must pass the block's contract (else 422)",
    ),
    (
        "reject",
        "rejected",
        ResolveRequest,
        "Reject, with a reason: the item ends with the pack's reviews.on_reject",
    ),
)
"""The resolutions a person can make: the path's last part (and the route's name), the
resolution recorded, the request's body and the summary in the OpenAPI document."""

for _verb, _kind, _body, _summary in RESOLUTIONS:
    router.add_api_route(
        f"/reviews/{{session}}/{{review}}/{_verb}",
        _resolution_route(_kind, _body),
        methods=["POST"],
        name=_verb,
        summary=_summary,
    )


# ---------------------------------------------------------------------------------- page


def _html(page: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        page,
        status_code=status,
        headers={
            # nothing from the network, no script, no framing by another site
            "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


@pages.get("/review", include_in_schema=False)
async def queue(request: Request) -> Response:
    settings = request.app.state.settings

    def work() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        return (
            served_reviews(settings.ledger, settings.sessions_dir),
            served_figures(settings.ledger, settings.sessions_dir),
        )

    found, figures = await _run(request, work)
    return _html(queue_page(found, figures, "Open reviews"))


@pages.get("/review/{session}/{review}", include_in_schema=False)
async def page(request: Request, at: ReviewAt = AT) -> Response:
    served = _served(request, at.session)
    found = await _run(request, served.show, at.review)
    return _html(review_page(found))


def _same_origin(request: Request) -> None:
    """A form posted from a page of another origin is refused (403)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return
    if urlsplit(origin).netloc != request.headers.get("host", ""):
        raise Problem(FORBIDDEN, "a review form is posted from the server's own /review page only")


@pages.post("/review/{session}/{review}", include_in_schema=False)
async def submit(
    request: Request, session: str = SessionPath, review: int = ReviewPath
) -> Response:
    """The page's form: check a draft, claim, approve, edit or reject; answered with the
    page again (a refusal or a failed check shown on it) or, once resolved, a redirect to
    the review's page."""
    _same_origin(request)
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Problem(INVALID_REQUEST, "the form is too large")
    form = {
        k: v[0]
        for k, v in parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True).items()
    }
    action = form.get("action", "")
    by = form.get("by", "").strip()
    text = form.get("output", "").replace("\r\n", "\n")
    reason = form.get("reason", "").strip() or None
    served = _served(request, session)

    def work() -> tuple[int, str]:
        found = served.show(review)
        pack = _pack(request, str(found["pack"]))
        try:
            if action == "check":
                if pack is None:
                    raise ReviewRefused("invalid", f"pack {found['pack']!r} is not served")
                verdict = served.check(pack, review, text)
                return 200, review_page(found, draft=text, check=verdict, person=by)
            if action == "claim":
                done = served.claim(review, by, DEFAULT_CLAIM_SECONDS)
                return 303, review_page(done, draft=text, person=by)
            kinds = {"approve": "approved", "edit": "edited", "reject": "rejected"}
            if action not in kinds:
                raise ReviewRefused("invalid", f"no such action {action[:40]!r}")
            served.resolve(pack, review, Resolution(kinds[action], by, text, reason))
            return 303, ""
        except OutputRefused as exc:
            return 422, review_page(
                found, draft=text, check=exc.verdict.to_json(), message=str(exc), person=by
            )
        except ReviewRefused as exc:
            if exc.kind == "not-found":
                raise
            status = 422 if exc.kind == "invalid" else 409
            return status, review_page(served.show(review), draft=text, message=str(exc), person=by)

    status, page_text = await _run(request, work)
    if status == 303:
        return RedirectResponse(f"/review/{session}/{review}", status_code=303)
    return _html(page_text, status)


__all__ = ["STATES", "router"]


SIGN_IN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in: review queue</title></head>
<body><main>
<h1>Sign in to the review queue</h1>
{message}<form method="post" action="/review/sign-in">
<label for="token">Server token (the contents of the server's --token-file)</label>
<input type="password" id="token" name="token" required autocomplete="current-password">
<button type="submit">Sign in</button>
</form>
</main></body></html>
"""


@sign_in.get("/review/sign-in", include_in_schema=False)
async def sign_in_page(request: Request) -> Response:
    if request.app.state.settings.token is None:  # nothing to sign in to
        return RedirectResponse("/review", status_code=303)
    return _html(SIGN_IN_PAGE.format(message=""))


@sign_in.post("/review/sign-in", include_in_schema=False)
async def sign_in_form(request: Request) -> Response:
    """The token given in the form: the pages' cookie (HttpOnly, SameSite=Strict, the
    /review paths only) and a redirect to the queue; else the form again, 401."""
    _same_origin(request)
    token: str | None = request.app.state.settings.token
    if token is None:
        return RedirectResponse("/review", status_code=303)
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise Problem(INVALID_REQUEST, "the form is too large")
    given = parse_qs(body.decode("utf-8", errors="replace")).get("token", [""])[0].strip()
    if not token_matches(f"Bearer {given}", token):
        refused = '<p aria-live="assertive">That is not the server\'s token.</p>\n'
        return _html(SIGN_IN_PAGE.format(message=refused), status=401)
    answer = RedirectResponse("/review", status_code=303)
    answer.set_cookie(
        PAGE_COOKIE,
        page_pass(token),
        httponly=True,
        samesite="strict",
        path="/review",
        secure=request.url.scheme == "https",
    )
    return answer
