"""Evaluating an output against its contract: the Verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from engine.core.results import Failure, ParseResult

if TYPE_CHECKING:
    from collections.abc import Mapping

Status = Literal["pass", "warn", "fail"]


@dataclass(frozen=True)
class Verdict:
    """Does the output meet its contract: status, failures (with severity), warnings, data."""

    block: str
    status: Status
    failures: list[Failure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    data: Any = None
    severities: Mapping[str, str] = field(default_factory=dict)
    """Failure type -> severity (the pack's; shared between verdicts, never changed)."""

    @property
    def error(self) -> str | None:
        return self.failures[0].message if self.failures else None

    @property
    def failure_type(self) -> str | None:
        return self.failures[0].type if self.failures else None

    def to_json(self) -> dict[str, Any]:
        return {
            "block": self.block,
            "status": self.status,
            "failures": [
                {**f.to_json(), "severity": self.severities.get(f.type)} for f in self.failures
            ],
            "warnings": list(self.warnings),
            "data": self.data,
        }


def verdict_from_parse(block: str, result: ParseResult, severities: Mapping[str, str]) -> Verdict:
    """The verdict on a parse, built without the frozen dataclass's per-field
    ``object.__setattr__`` calls (one is built for every output evaluated); the object is
    the same as ``Verdict(block, status, failures, warnings, data, severities)``."""
    verdict = object.__new__(Verdict)
    if result.ok:
        status: Status = "warn" if result.warnings else "pass"
        failures: list[Failure] = []
        data = result.data
    else:
        status, data = "fail", None
        failures = [result.failure] if result.failure else []
    verdict.__dict__.update(
        block=block,
        status=status,
        failures=failures,
        warnings=list(result.warnings),
        data=data,
        severities=severities,
    )
    return verdict


def verdict_from_error(
    block: str, message: str, failure_type: str, severities: Mapping[str, str]
) -> Verdict:
    """A failed verdict whose error comes from outside (another parser, a crashed tool)."""
    return Verdict(block, "fail", [Failure(failure_type, message)], [], None, severities)


def verdict_from_checks(
    block: str,
    failures: list[Failure],
    warnings: list[str],
    data: Any,
    severities: Mapping[str, str],
) -> Verdict:
    status: Status = "fail" if failures else "warn" if warnings else "pass"
    return Verdict(block, status, failures, warnings, data, severities)
