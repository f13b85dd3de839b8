"""The results CI formats report on: ``CiCase`` records (a pack checked, or one pack test
case, with the findings that make it fail) and the runs of `rules test`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.format.findings import Finding
from engine.pack.result import CheckResult

if TYPE_CHECKING:
    from engine.pack.selftests import CaseResult


@dataclass(frozen=True)
class CiCase:
    """One thing CI reports on: a pack checked, or one pack test case."""

    suite: str
    name: str
    findings: Sequence[Finding] = field(default_factory=tuple)

    @property
    def failed(self) -> bool:
        return any(f.level == "error" for f in self.findings)


@dataclass(frozen=True)
class PackTestRuns:
    """What `rules test` ran: each pack's name with its case results, and its version."""

    runs: list[tuple[str, list[CaseResult]]]
    versions: dict[str, str]

    @property
    def results(self) -> list[CaseResult]:
        return [r for _, rs in self.runs for r in rs]

    @property
    def passed(self) -> int:
        return sum(r.passed for r in self.results)

    @property
    def pass_rate(self) -> float:
        results = self.results
        return self.passed / len(results) if results else 1.0


def check_cases(results: list[CheckResult]) -> list[CiCase]:
    """`rules check` results as CI cases: one per pack."""
    return [CiCase("rules check", r.name or r.target, tuple(r.findings)) for r in results]


def case_findings(result: CaseResult) -> list[Finding]:
    """A failing case as one finding at the case (rule `pack-test-failed`)."""
    if result.passed:
        return []
    message = f"test {result.name!r} failed: " + "; ".join(result.problems)
    return [Finding("pack-test-failed", message, result.position, "run `rules test` for the diff")]


def pack_test_cases(runs: PackTestRuns) -> list[CiCase]:
    """`rules test` case results as CI cases: one per case."""
    return [
        CiCase(f"rules test {name}", r.name, case_findings(r)) for name, rs in runs.runs for r in rs
    ]
