"""The one error of the ledger package."""

from __future__ import annotations

from engine.core.errors import EngineError


class LedgerError(EngineError):
    """A ledger cannot be used: a location that is no ledger URL, a server that cannot be
    reached, a schema newer than this engine's, a write that failed twice. Its message names
    the ledger by its redacted URL only (``engine.ledger.url.redacted``)."""
