"""Telling the pack's ``reviews.webhook`` that a review was resolved.

The call comes after the resolution is committed and never undoes it: a hook that cannot
be reached is a warning returned to the caller. Each try is bounded by the hook's
``timeout``, tried up to ``attempts`` times with a short pause between; a redirect is never
followed (a URL that answers with one is misconfigured or hostile, and following it could
send the signed body elsewhere). The body is signed with HMAC-SHA256 under the secret the
environment variable ``secret_env`` holds; without the secret nothing is sent.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from engine.core.redaction import scrub
from engine.pack.compiled import Pack

SIGNATURE_HEADER = "X-Rules-Signature"
PAUSE_SECONDS = 0.5
SENT_KEYS = (
    "id", "session", "pack", "revision", "block", "item", "run", "action", "state",
    "created", "due", "resolution", "resolved_by", "resolved_at", "reason",
)  # fmt: skip
"""What the hook is told of a review: not its material (outputs and prompts stay in the
ledger), nor an edited output."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # the 3xx is then raised as an HTTPError: a failed try


_OPENER = urllib.request.build_opener(_NoRedirects)


def signature(secret: str, body: bytes) -> str:
    """The value of ``X-Rules-Signature`` for ``body``: ``sha256=`` and the hex HMAC."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def notify(pack: Pack | None, review: Mapping[str, Any]) -> list[str]:
    """Call the pack's webhook with the resolved ``review``; the warnings of what failed
    (empty when it was told, or when the pack declares no hook)."""
    hook = None if pack is None else pack.model.reviews.webhook
    if hook is None:
        return []
    secret = os.environ.get(hook.secret_env)
    if not secret:
        return [
            f"review {review['id']}: the webhook was not called: the environment variable "
            f"{hook.secret_env} holding its signing secret is not set"
        ]
    body = json.dumps(
        {"event": "review.resolved", "review": {k: review.get(k) for k in SENT_KEYS}},
        ensure_ascii=True,
        sort_keys=True,
    ).encode("ascii")
    headers = {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: signature(secret, body),
        "User-Agent": "rules-engine-review-webhook",
    }
    failures = []
    for attempt in range(1, int(hook.attempts) + 1):
        request = urllib.request.Request(str(hook.url), data=body, headers=headers, method="POST")
        try:
            with _OPENER.open(request, timeout=float(hook.timeout)) as answer:
                if 200 <= answer.status < 300:
                    return []
                failures.append(f"status {answer.status}")
        except urllib.error.HTTPError as exc:
            failures.append(
                f"status {exc.code}"
                + (" (a redirect, not followed)" if 300 <= exc.code < 400 else "")
            )
        except (OSError, ValueError) as exc:  # refused, timed out, unreachable
            failures.append(scrub(" ".join(str(exc).split()))[:200])
        if attempt < int(hook.attempts):
            time.sleep(PAUSE_SECONDS * attempt)
    return [
        f"review {review['id']}: the webhook did not accept the resolution after "
        f"{len(failures)} tries ({'; '.join(failures)}); the review stays resolved"
    ]
