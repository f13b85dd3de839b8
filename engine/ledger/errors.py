"""The errors of the ledger package: ``LedgerError``, and its ``LedgerTimeout``."""

from __future__ import annotations

from engine.core.errors import EngineError


class LedgerError(EngineError):
    """A ledger cannot be used: a location that is no ledger URL, a server that cannot be
    reached, a schema newer than this engine's, a write that failed twice. Its message names
    the ledger by its redacted URL only (``engine.ledger.url.redacted``)."""


class LedgerTimeout(LedgerError):
    """A write whose caller's deadline (``engine.core.deadline``: a server request's time
    limit) passed before it committed: it was rolled back, nothing of it was written."""
