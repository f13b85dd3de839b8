"""What the server writes about requests, and the one place a token may travel.

- ``TokenPlacement`` refuses a request that carries a credential anywhere but the
  ``Authorization`` header: a query parameter named like one (``?access_token=``, ``?token=``,
  ``?api_key=``...) or whose value is the server's token, or the token in another header. A
  URL is written to proxies' logs and browsers' histories, so such a request is answered
  400 ``token-misplaced`` saying where the token goes, and nothing of it is logged.
- ``AccessLog`` writes the server's access log, one line per request: method, path (never
  the query string), status and time. Bodies and headers are never logged. uvicorn's own
  access log is off (it writes the query string).
- ``log_config`` is uvicorn's logging set-up: every handler scrubs the registered secrets
  (``engine.core.redaction``) from every record, uvicorn's error log included.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.types import Receive, Scope, Send

from engine.core.redaction import scrub
from engine.server.middleware import HttpMiddleware, ResponseStatus
from engine.server.problems import TOKEN_MISPLACED, problem_response

ACCESS_LOGGER = "rules.serve.access"
access_log = logging.getLogger(ACCESS_LOGGER)

CREDENTIAL_PARAMETERS = frozenset(
    {
        "access_token", "accesstoken", "token", "bearer", "auth", "authorization",
        "api_key", "apikey", "api-key", "key", "password", "secret", "jwt",
        "id_token", "refresh_token", "session_token",
    }
)  # fmt: skip
"""Query parameter names that carry a credential (compared without case)."""

CREDENTIAL_HEADERS = frozenset(
    {"x-api-key", "api-key", "x-auth-token", "x-access-token", "x-token", "token"}
)
"""Headers other than ``Authorization`` that clients put tokens in."""

WHERE = (
    "send the token in the `Authorization: Bearer <token>` header only, never in the URL "
    "or another header (a URL is kept in proxies' logs and browsers' histories); this "
    "request was not served, and if it carried the server's token, replace that token"
)

MAX_LOGGED_PATH = 2048


def misplaced_credential(scope: Scope, token: str | None) -> str | None:
    """Where the request carries a credential outside ``Authorization`` (``query
    parameter 'x'``, ``header 'x'``), or None."""
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name.lower() in CREDENTIAL_PARAMETERS or _is_token(value, token):
            return f"query parameter {name[:64]!r}"
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        if name == "authorization":
            continue
        value = raw_value.decode("latin-1")
        if name in CREDENTIAL_HEADERS or _is_token(value, token):
            return f"header {name[:64]!r}"
    return None


def _is_token(value: str, token: str | None) -> bool:
    if token is None:
        return False
    given = value.strip()
    if given[:7].lower() == "bearer ":
        given = given[7:].strip()
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


class TokenPlacement(HttpMiddleware):
    """ASGI middleware: a credential outside ``Authorization`` is answered 400, before any
    route or the token check sees the request."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = getattr(scope["app"].state.settings, "token", None) if "app" in scope else None
        where = misplaced_credential(scope, token)
        if where is None:
            await self.app(scope, receive, send)
            return
        response = problem_response(TOKEN_MISPLACED, f"a credential in the {where}: {WHERE}")
        await response(scope, receive, send)


class AccessLog(HttpMiddleware):
    """ASGI middleware: one access-log line per request (``GET /v1/packs 200 1.2 ms``)."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        sending = ResponseStatus(send)

        try:
            await self.app(scope, receive, sending)
        finally:
            elapsed = (time.perf_counter() - started) * 1000
            access_log.info(
                "%s %s %d %.1f ms",
                scope.get("method", ""),
                logged_path(scope),
                sending.code,
                elapsed,
            )


def logged_path(scope: Scope) -> str:
    """The request's path as sent, without its query string, percent-encoded (no line
    break or control character can reach the log), at most ``MAX_LOGGED_PATH`` characters."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) else str(scope.get("path", ""))
    path = path.partition("?")[0]
    shown = quote(path, safe="/%:@!$&'()*+,;=-._~")
    return shown if len(shown) <= MAX_LOGGED_PATH else shown[:MAX_LOGGED_PATH] + "..."


def log_config() -> dict[str, Any]:
    """uvicorn's ``log_config``: its error log and the server's own messages on stderr,
    the access log on stdout, every record scrubbed of secrets."""
    scrubbing = {"()": "engine.server.access.ScrubFilter"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"scrub": scrubbing},
        "formatters": {
            "default": {
                "()": "uvicorn.logging.DefaultFormatter",
                "fmt": "%(levelprefix)s %(message)s",
                "use_colors": None,
            },
            "access": {"format": "%(message)s"},
        },
        "handlers": {
            "default": {
                "formatter": "default",
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "filters": ["scrub"],
            },
            "access": {
                "formatter": "access",
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stdout",
                "filters": ["scrub"],
            },
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
            "rules.serve": {"handlers": ["default"], "level": "INFO", "propagate": False},
            ACCESS_LOGGER: {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


class ScrubFilter(logging.Filter):
    """A logging filter that scrubs a record's message and its traceback before any
    handler formats them (attached to the server's log handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        record.__dict__.pop("color_message", None)  # uvicorn's coloured copy of the message
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        return True
