"""What parsing and evaluating produce: plain, typed, JSON-ready results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Failure:
    """Why an output was rejected: its failure type, the exact message, and the line if known."""

    type: str
    message: str
    line: int | None = None
    path: str | None = None
    """The JSON Pointer of the value at fault, for a JSON document (else None)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "message": self.message, "line": self.line}
        if self.path is not None:
            out["path"] = self.path
        return out


@dataclass(frozen=True)
class ParseResult:
    """The outcome of a deterministic parse of one block."""

    ok: bool
    data: dict[str, Any] | list[dict[str, Any]] | None = None
    """The block's data; a list of them for a contract of several blocks."""
    failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return self.failure.message if self.failure else None

    @classmethod
    def success(
        cls, data: dict[str, Any] | list[dict[str, Any]], warnings: list[str]
    ) -> ParseResult:
        """A successful result, built without the frozen dataclass's per-field
        ``object.__setattr__`` calls (a third of a small block's parse otherwise); the object
        is the same as ``ParseResult(ok=True, data=data, warnings=warnings)``."""
        result = object.__new__(cls)
        result.__dict__.update(ok=True, data=data, failure=None, warnings=warnings)
        return result

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "data": self.data,
            "error": self.error,
            "failure": self.failure.to_json() if self.failure else None,
            "warnings": list(self.warnings),
        }
