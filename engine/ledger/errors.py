"""The one error of the ledger package (defined in ``engine.core.errors``, where the front
doors that answer it, a 503 of the server, reach it without importing the ledger)."""

from __future__ import annotations

from engine.core.errors import LedgerError

__all__ = ["LedgerError"]
