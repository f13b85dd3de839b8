"""Secrets are never printed: one redaction for every text the engine shows or sends.

A secret is known by its value. Whatever reads one (a ledger URL's password, a server's
bearer token) registers it here with ``register``; ``scrub`` then removes every registered
value from a text, in each form a program may show it (as written, percent-encoded,
percent-decoded) and in the pieces a URL parser could cut it into at ``@ : / ? # & =``
(psycopg once showed ``failed to resolve host 'Tail@127.0.0.1'`` for a password
``Top@Tail``: libpq split the user part at its first ``@``). A URL whose shape shows a
password (``scheme://user:password@host``) loses it too, registered or not.

What goes through ``scrub``: the messages of errors the ledger raises, everything the
`rules` command writes to stdout and stderr (``guard_streams``: its own messages, a driver's,
a warning, a traceback under ``RULES_DEBUG``), every log record of the server
(``ScrubFilter``: uvicorn's and the access log), and the attributes and errors of spans.

Values shorter than ``MIN_SECRET`` characters are not scrubbed by value (they would cut
words out of every message; such a secret is guessed sooner than read anyway); the shape
of a URL still hides them.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

MIN_SECRET = 4
"""The shortest value (and piece of a value) that is scrubbed wherever it appears."""

MASK = "***"

_CUTS = re.compile(r"[@:/?#&=]")
# scheme://user:password@host, found from its "://" (a literal: the search is fast); the
# password runs to the last "@" before the host's end
_URL_WITH_PASSWORD = re.compile(
    r"://(?<=[A-Za-z0-9+.-]://)(?P<user>[^\s/'\"<>?#:@]*):"
    r"(?P<password>[^\s/'\"<>?#]+)(?P<tail>@[^\s/'\"<>?#@]*)"
)
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&](?:password|access_token|token)=)[^&#\s'\"]*", re.I)

_QUERY_NAMES = ("password=", "token=", "PASSWORD=", "TOKEN=", "Password=", "Token=")

_lock = threading.Lock()
_forms: set[str] = set()
_pattern: re.Pattern[str] | None = None
_ordered: tuple[str, ...] = ()


def forms(secret: str) -> set[str]:
    """The texts ``secret`` may be shown as: itself, encoded, decoded, and its pieces
    between URL delimiters (each at least ``MIN_SECRET`` characters)."""
    # Imported when a secret is first registered: every command loads this module before
    # it parses its options, and urllib.parse is 2.8 ms of `rules --version`'s start-up
    # (python -X importtime -m engine --version).
    from urllib.parse import quote, quote_plus, unquote, unquote_plus

    whole = {secret, unquote(secret), unquote_plus(secret), quote(secret, safe=""),
             quote_plus(secret), quote(secret, safe="@:/")}  # fmt: skip
    pieces = {piece for value in whole for piece in _CUTS.split(value)}
    return {form for form in whole | pieces if len(form) >= MIN_SECRET}


def register(secret: str | None) -> None:
    """Scrub ``secret`` from every text from now on, in this process."""
    global _pattern, _ordered
    if not secret:
        return
    new = forms(secret) - _forms
    if not new:
        return
    with _lock:
        _forms.update(new)
        ordered = sorted(_forms, key=len, reverse=True)  # no piece of a longer form is left
        _pattern = re.compile("|".join(re.escape(form) for form in ordered))
        _ordered = tuple(ordered)


SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
"""The environment variables whose values are secrets (``OPENAI_API_KEY``, ``HF_TOKEN``)."""
MIN_ENVIRONMENT_SECRET = 8
"""The shortest such value scrubbed (shorter ones are flags and words: ``1``, ``true``)."""


def scrub_environment(text: str, environ: Mapping[str, str]) -> str:
    """``text`` scrubbed, and without the value of any variable of ``environ`` whose name
    says it is a secret: a model command inherits them and may print one on its stderr.
    The values are not registered: other texts of the process keep them."""
    values = sorted(
        (
            value
            for name, value in environ.items()
            if SECRET_NAME.search(name) and len(value) >= MIN_ENVIRONMENT_SECRET
        ),
        key=len,
        reverse=True,
    )
    for value in values:
        text = text.replace(value, MASK)
    return scrub(text)


def scrub(text: str) -> str:
    """``text`` without any registered secret and without a password a URL in it shows."""
    pattern = _pattern
    if pattern is not None and any(form in text for form in _ordered):  # fast: most have none
        text = pattern.sub(MASK, text)
    if "@" in text and "://" in text:
        text = _url_passwords_masked(text)
    if any(name in text for name in _QUERY_NAMES):  # a fast test: most texts have none
        text = _QUERY_PASSWORD.sub(r"\g<head>" + MASK, text)
    return text


def _url_passwords_masked(text: str) -> str:
    """``text`` with the password of each ``scheme://user:password@host`` masked: the
    user part ends at the last ``@`` before the host's end. In linear time: a match is
    tried at each ``://``, and the part after it ends at the first ``/``, so no two tries
    read the same part."""
    return _URL_WITH_PASSWORD.sub(_masked, text)


def _masked(found: re.Match[str]) -> str:
    if found["password"].lower() in ("password", MASK):  # a form shown in help: no secret
        return found[0]
    return f"://{found['user']}:{MASK}{found['tail']}"


class ScrubbingStream:
    """A text stream whose writes are scrubbed; everything else is the wrapped stream's
    (its encoding, ``fileno``, ``buffer``...), so click and subprocesses use it as usual."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: Any) -> int:
        if isinstance(text, str):
            text = scrub(text)
        return self._stream.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_streams() -> None:
    """Scrub everything this process writes to ``sys.stdout`` and ``sys.stderr`` from now
    on (the `rules` command calls it first)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, ScrubbingStream):
            setattr(sys, name, ScrubbingStream(stream))
