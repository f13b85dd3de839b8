"""The errors of the ledger package, ``LedgerError`` and ``LedgerTimeout``: defined in
``engine.core.errors``, where the front doors that answer them (a 503 of the server) reach
them without importing the ledger."""

from __future__ import annotations

from engine.core.errors import LedgerError, LedgerTimeout

__all__ = ["LedgerError", "LedgerTimeout"]
