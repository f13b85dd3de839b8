"""The ledger of sessions, on SQLite or PostgreSQL: where a ledger lives (``url``), opening
it and running transactions (``connection``), its schema and migrations (``schema``), and
one repository per concept (``attempts``). The only package that runs SQL."""

from __future__ import annotations

from engine.ledger.errors import LedgerError
from engine.ledger.url import LedgerUrl, parse_url, redacted

__all__ = ["LedgerError", "LedgerUrl", "parse_url", "redacted"]
