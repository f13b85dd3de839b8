"""Who may call: a bearer token on every /v1 route when the server has one, compared in
constant time; the admin routes from loopback only when it has none. The token is never
logged or echoed."""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request

from engine.core import redaction
from engine.server.problems import FORBIDDEN, UNAUTHORIZED, Problem
from engine.server.settings import is_loopback

CHALLENGE = {"WWW-Authenticate": 'Bearer realm="rules"'}


class TokenFileError(Exception):
    """The token file cannot be used (its message names the file, never the token)."""


def read_token(path: str | Path) -> str:
    """The token in ``path`` (surrounding white space removed); it must not be empty."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{path}: cannot read the token file: {exc}") from None
    if not token:
        raise TokenFileError(f"{path}: the token file is empty")
    if any(c.isspace() for c in token):
        raise TokenFileError(f"{path}: the token must be one word (no white space inside)")
    redaction.register(token)  # never printed or logged by this process from now on
    return token


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as a bearer token."""
    if header is None:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))


async def require_token(request: Request) -> None:
    """The dependency of every /v1 route: 401 without the server's token."""
    token: str | None = request.app.state.settings.token
    if token is not None and not token_matches(request.headers.get("authorization"), token):
        raise Problem(
            UNAUTHORIZED,
            "send `Authorization: Bearer <token>` with the token of the server's --token-file",
            headers=CHALLENGE,
        )


PAGE_COOKIE = "rules_review"
"""The cookie the review page's sign-in sets: a value derived from the token (never the
token itself), sent back by the browser on the /review pages only."""


def page_pass(token: str) -> str:
    """What the review page's cookie holds for ``token``: an HMAC of a fixed label under
    the token, so the cookie grants the pages and cannot be turned back into the token
    the API takes."""
    return hmac.new(token.encode("utf-8"), b"rules review page", "sha256").hexdigest()


def api_router(tag: str, responses: dict[int | str, dict[str, Any]] | None = None) -> APIRouter:
    """A router of ``/v1`` routes, each behind ``require_token``, listed under ``tag`` in
    the OpenAPI document (``responses``: what every route of it can answer)."""
    return APIRouter(
        prefix="/v1", dependencies=[Depends(require_token)], tags=[tag], responses=responses
    )


async def require_page_access(request: Request) -> None:
    """The dependency of the /review pages: the token as for the API, or the cookie the
    page's sign-in (``/review/sign-in``) set, since a browser sends no bearer header."""
    token: str | None = request.app.state.settings.token
    if token is None or token_matches(request.headers.get("authorization"), token):
        return
    given = request.cookies.get(PAGE_COOKIE, "")
    if not hmac.compare_digest(given.encode("utf-8"), page_pass(token).encode("utf-8")):
        raise Problem(
            UNAUTHORIZED,
            "sign in at /review/sign-in with the token of the server's --token-file (or "
            "send `Authorization: Bearer <token>`)",
            headers=CHALLENGE,
        )


async def require_admin(request: Request) -> None:
    """The admin routes: the token when the server has one, else a loopback client."""
    await require_token(request)
    if request.app.state.settings.token is None:
        client = request.client.host if request.client else ""
        if not is_loopback(client):
            raise Problem(
                FORBIDDEN,
                "without --token-file the admin routes answer loopback clients only",
            )
