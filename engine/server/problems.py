"""Errors as RFC 9457 problem details (``application/problem+json``): one ``type`` URI per
class of error, a title, the status, a detail, and for 422 the request fields at fault.

Nothing a client sends is answered with a 5xx but 503 (the ledger unavailable, or the
request over its time limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from engine.server.responses import Document

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:rules-engine:problem:"


@dataclass(frozen=True)
class ProblemType:
    slug: str
    status: int
    title: str

    @property
    def uri(self) -> str:
        return TYPE_PREFIX + self.slug


MALFORMED_JSON = ProblemType("malformed-json", 400, "The request body is not valid JSON")
TOKEN_MISPLACED = ProblemType("token-misplaced", 400, "The token goes in the Authorization header")
UNAUTHORIZED = ProblemType("unauthorized", 401, "A valid bearer token is required")
FORBIDDEN = ProblemType("forbidden", 403, "This route is not open to this client")
NOT_FOUND = ProblemType("not-found", 404, "No such resource")
METHOD_NOT_ALLOWED = ProblemType("method-not-allowed", 405, "Method not allowed")
SESSION_PAUSED = ProblemType("session-paused", 409, "The session is paused")
REVIEW_NOT_FOUND = ProblemType("review-not-found", 404, "No such review or session")
REVIEW_TAKEN = ProblemType("review-taken", 409, "The review is claimed by another or resolved")
REVIEW_REFUSED = ProblemType("review-refused", 422, "The review cannot be resolved so")
REQUEST_TIMEOUT = ProblemType("request-timeout", 408, "The request body did not arrive in time")
BODY_TOO_LARGE = ProblemType("body-too-large", 413, "The request body is over the limit")
UNSUPPORTED_MEDIA = ProblemType("unsupported-media-type", 415, "The body must be JSON")
HEADERS_TOO_LARGE = ProblemType("headers-too-large", 431, "The request's head is over the limit")
INVALID_REQUEST = ProblemType("invalid-request", 422, "The request does not fit the schema")
UNKNOWN_PACK = ProblemType("unknown-pack", 422, "No pack of that name is served")
UNKNOWN_BLOCK = ProblemType("unknown-block", 422, "The pack has no such block")
MISSING_INPUT = ProblemType("missing-input", 422, "The block needs an input the caller gives")
ENGINE_REFUSED = ProblemType("engine-refused", 422, "The engine refused the input")
PACK_CHECK_FAILED = ProblemType("pack-check-failed", 422, "A pack failed its check")
LEDGER_UNAVAILABLE = ProblemType("ledger-unavailable", 503, "The ledger is unavailable")
TIMEOUT = ProblemType("timeout", 503, "The request took longer than its time limit")
NOT_READY = ProblemType("not-ready", 503, "The server is not ready")

PROBLEM_TYPES: tuple[ProblemType, ...] = (
    MALFORMED_JSON,
    TOKEN_MISPLACED,
    UNAUTHORIZED,
    FORBIDDEN,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    SESSION_PAUSED,
    REVIEW_NOT_FOUND,
    REVIEW_TAKEN,
    REVIEW_REFUSED,
    REQUEST_TIMEOUT,
    BODY_TOO_LARGE,
    UNSUPPORTED_MEDIA,
    INVALID_REQUEST,
    HEADERS_TOO_LARGE,
    UNKNOWN_PACK,
    UNKNOWN_BLOCK,
    MISSING_INPUT,
    ENGINE_REFUSED,
    PACK_CHECK_FAILED,
    LEDGER_UNAVAILABLE,
    TIMEOUT,
    NOT_READY,
)


class Problem(Exception):
    """An error answered as a problem document."""

    def __init__(
        self,
        kind: ProblemType,
        detail: str,
        fields: Sequence[str] = (),
        *,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail
        self.fields = tuple(fields)
        self.extra = extra or {}
        self.headers = headers


def problem_document(
    kind: ProblemType, detail: str, fields: Sequence[str] = (), **extra: Any
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "type": kind.uri,
        "title": kind.title,
        "status": kind.status,
        "detail": detail,
    }
    if fields:
        document["fields"] = list(fields)
    document.update(extra)
    return document


def problem_response(
    kind: ProblemType,
    detail: str,
    fields: Sequence[str] = (),
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Document:
    return Document(
        problem_document(kind, detail, fields, **extra),
        status_code=kind.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=headers,
    )


def _location(loc: Sequence[int | str]) -> str:
    """``("body", "vars", "x")`` as ``vars.x``: the field's place in the request."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:] if len(parts) > 1 else parts
    return ".".join(parts)


async def _on_problem(request: Request, exc: Exception) -> Document:
    assert isinstance(exc, Problem)
    return problem_response(exc.kind, exc.detail, exc.fields, exc.headers, **exc.extra)


async def _on_validation(request: Request, exc: Exception) -> Document:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        first = next(e for e in errors if e.get("type") == "json_invalid")
        reason = (first.get("ctx") or {}).get("error", "invalid JSON")
        return problem_response(MALFORMED_JSON, f"the body is not valid JSON: {reason}")
    fields = [_location(e.get("loc", ())) for e in errors]
    detail = "; ".join(f"{_location(e.get('loc', ()))}: {e.get('msg', '')}" for e in errors[:10])
    return problem_response(
        INVALID_REQUEST,
        detail,
        fields,
        errors=[
            {"field": f, "message": str(e.get("msg", ""))}
            for f, e in zip(fields, errors, strict=True)
        ],
    )


STATUS_TYPES = {
    kind.status: kind for kind in (MALFORMED_JSON, NOT_FOUND, METHOD_NOT_ALLOWED, UNAUTHORIZED)
}
"""FastAPI's own HTTP errors: a 400 is a body it could not parse (e.g. nested too deep)."""


async def _on_http(request: Request, exc: Exception) -> Document:
    assert isinstance(exc, StarletteHTTPException)
    kind = STATUS_TYPES.get(exc.status_code)
    if kind is None:  # another status Starlette raises: keep it, as a problem
        kind = ProblemType(f"http-{exc.status_code}", exc.status_code, str(exc.detail))
    return problem_response(kind, str(exc.detail), headers=dict(exc.headers or {}))


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error, FastAPI's own (validation, 404, 405) included, as a problem."""
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)


def problem_responses(*kinds: ProblemType) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of the problems a route can answer."""
    out: dict[int | str, dict[str, Any]] = {}
    for kind in kinds:
        entry = out.setdefault(
            kind.status,
            {
                "description": kind.title,
                "content": {
                    PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}
                },
            },
        )
        if entry["description"] != kind.title:
            entry["description"] += f"; {kind.title}"
    return out


def route_responses(document: type[Any], *kinds: ProblemType) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of a route: its document (a pydantic model) and the problems
    it can answer."""
    return {200: {"model": document}, **problem_responses(*kinds)}
