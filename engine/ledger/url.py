"""Where a ledger lives: a SQLite file or a PostgreSQL database, named by a path or a URL.

Accepted forms::

    path/to/ledger.db                         a SQLite file (relative or absolute)
    sqlite:///absolute/path/ledger.db         the same, as a URL
    postgresql://user:password@host:5432/db   a PostgreSQL database (also postgres://)

A password written in a URL is never shown: ``redacted`` replaces it with ``***``, and
``LedgerUrl`` prints (``str``, ``repr``) only that form. Parsing a URL registers its password
with ``engine.core.redaction``, so that no message of this process shows it, whatever
shape a driver gives it. The user part ends at the last ``@`` before the host (a password
may hold an unencoded ``@``), and the driver is handed the parts one by one
(``connection_parameters``), never the URL to split again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, unquote_plus, urlsplit

from engine.core import redaction
from engine.ledger.errors import LedgerError

ACCEPTED = (
    "a path or sqlite:///path (SQLite), or postgresql://user:password@host:port/dbname "
    "(PostgreSQL; also postgres://)"
)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_ANY_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:(//)?")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)
_QUERY_VALUE = re.compile(r"(^|&)password=([^&#]*)", re.IGNORECASE)

Backend = Literal["sqlite", "postgresql"]


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***``: the part between the first ``:``
    after the scheme and the last ``@`` (when there is one; an ``@`` a password holds
    unencoded still hides all of it), and a ``password=`` query parameter."""
    text = _QUERY_PASSWORD.sub(r"\1***", str(url))
    scheme = _ANY_SCHEME.match(text)  # also "postgresql:u:pw@h/db", a URL missing its //
    if scheme is None:
        return text
    start = scheme.end()
    at = text.rfind("@")
    if at < start:
        return text
    colon = text.find(":", start, at)
    if colon < 0:
        return text
    return text[: colon + 1] + "***" + text[at:]


@dataclass(frozen=True)
class LedgerUrl:
    """A parsed ledger location. ``secret`` is the URL as given (it may hold a password):
    only connecting reads it; everything shown uses ``shown``."""

    backend: Backend
    shown: str
    path: Path | None = None
    secret: str = field(default="", repr=False, compare=False)

    def __str__(self) -> str:
        return self.shown

    def scrub(self, text: str) -> str:
        """``text`` (e.g. a driver's error message) with this URL's password removed: the
        one before the host and a ``password=`` query value, each as written in the URL
        (percent-encoded) and decoded, as a driver may show either, and any other secret
        this process registered (``engine.core.redaction``)."""
        text = text.replace(self.secret, self.shown) if self.secret else text
        for password in _passwords(self.secret):
            text = text.replace(password, "***")
        return redaction.scrub(text)

    def connection_parameters(self) -> dict[str, str]:
        """The libpq parameters of a PostgreSQL URL, decoded: ``user``, ``password``,
        ``host``, ``port``, ``dbname`` and the query's own (``sslmode=``...). The driver
        gets these, not the URL: libpq ends the user part at the first ``@``, so a
        password holding one would have its tail taken for the host (and shown)."""
        parts = urlsplit(self.secret)
        found = {
            "user": unquote(parts.username or ""),
            "password": unquote(parts.password or ""),
            "host": parts.hostname or "",
            "port": str(parts.port or ""),
            "dbname": unquote(parts.path.lstrip("/")),
        }
        for pair in parts.query.split("&"):
            key, _, value = pair.partition("=")
            if key:
                found[unquote(key)] = unquote(value)
        return {key: value for key, value in found.items() if value}


def _passwords(url: str) -> list[str]:
    """Every form of the passwords ``url`` holds, longest first (so that no part of a
    longer one is left when a shorter one is inside it): the one ``urlsplit`` finds, the
    one between the user and the last ``@`` of the whole text (a password holding an
    unencoded ``/`` ends the host part early), and ``password=`` query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    written = [parts.password] if parts.password else []
    written += [m.group(2) for m in _QUERY_VALUE.finditer(parts.query)]
    if (shaped := _shaped_password(url)) is not None:
        written.append(shaped)
    forms = {form for raw in written for form in (raw, unquote(raw), unquote_plus(raw)) if form}
    return sorted(forms, key=len, reverse=True)


def _shaped_password(url: str) -> str | None:
    """The text ``redacted`` hides: from the first ``:`` after the scheme to the last
    ``@``; None when there is none."""
    scheme = _ANY_SCHEME.match(url)
    at = url.rfind("@")
    if scheme is None or at < scheme.end():
        return None
    colon = url.find(":", scheme.end(), at)
    return url[colon + 1 : at] if colon >= 0 else None


def parse_url(location: str | Path) -> LedgerUrl:
    """The ledger ``location`` names; a LedgerError naming it (redacted) and the accepted
    forms when it is none of them."""
    if isinstance(location, Path):
        return LedgerUrl("sqlite", str(location), location)
    text = str(location)
    for password in _passwords(text):
        redaction.register(password)
    shown = redacted(text)
    if not text.strip():
        raise LedgerError(f"an empty ledger location; give {ACCEPTED}")
    scheme = _SCHEME.match(text)
    if scheme is None:
        if text.lower().startswith(("postgres:", "postgresql:", "sqlite:")):
            raise LedgerError(
                f"{shown}: not a ledger URL (no '//' after the scheme); give {ACCEPTED}"
            )
        return LedgerUrl("sqlite", text, Path(text))
    name = scheme.group(1).lower()
    if name == "sqlite":
        return _sqlite(text, shown)
    if name in ("postgresql", "postgres"):
        return _postgresql(text, shown)
    raise LedgerError(f"{shown}: unknown ledger scheme {name!r}; give {ACCEPTED}")


def _sqlite(text: str, shown: str) -> LedgerUrl:
    parts = urlsplit(text)
    if parts.netloc not in ("", "localhost") or not parts.path or parts.query:
        raise LedgerError(
            f"{shown}: a SQLite ledger URL is sqlite:///path (three slashes, then the "
            f"file's absolute path); give {ACCEPTED}"
        )
    path = Path(unquote(parts.path))
    return LedgerUrl("sqlite", shown, path)


def _postgresql(text: str, shown: str) -> LedgerUrl:
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise LedgerError(
            f"{shown}: the port is not a number from 0 to 65535; give {ACCEPTED}"
        ) from None
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname and "host=" not in parts.query:
        raise LedgerError(f"{shown}: no server host; give {ACCEPTED}")
    if not database or "/" in database:
        raise LedgerError(f"{shown}: no database name (…/dbname at the end); give {ACCEPTED}")
    del port  # checked above: urlsplit reads it lazily
    return LedgerUrl("postgresql", shown, None, text)
