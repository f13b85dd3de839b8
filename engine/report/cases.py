"""The results CI formats report on: ``CiCase`` records (a pack checked, or one pack test
case, with the findings that make it fail) and the runs of `rules test`: each pack's cases,
the packs with none (a warning, an error with --strict) and, with --with-base, the cases of
its bases that the pack changes (likewise)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.core.errors import Position
from engine.format.findings import Finding, Level
from engine.pack.result import CheckResult

if TYPE_CHECKING:
    from engine.pack.selftests import BaseCaseChange, BaseRun, CaseResult


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
    files: dict[str, str] = field(default_factory=dict)
    """Each pack's file, as shown (where a pack without cases is reported)."""
    bases: dict[str, list[BaseRun]] = field(default_factory=dict)
    """With --with-base: each pack's bases, with the base cases the pack changes."""
    strict: bool = False
    """--strict: a pack without cases and a changed base case are errors, not warnings."""

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

    @property
    def level(self) -> Level:
        """The level of the notices: warnings, or errors with --strict."""
        return "error" if self.strict else "warning"

    @property
    def without_cases(self) -> list[str]:
        """The packs that have no test cases."""
        return [name for name, results in self.runs if not results]

    @property
    def changes(self) -> list[tuple[str, BaseRun, BaseCaseChange]]:
        """Every changed base case: the extending pack, the base, the change."""
        return [
            (name, base, change)
            for name, bases in self.bases.items()
            for base in bases
            for change in base.changes
        ]

    def no_cases_finding(self, name: str) -> Finding:
        return Finding(
            "pack-no-cases",
            f"pack {name!r} has no test cases",
            Position(self.files.get(name, name)),
            "add a `tests:` list, case files tests/*.yaml or fixture folders tests/BLOCK/",
            self.level,
        )

    def change_finding(self, name: str, base: BaseRun, change: BaseCaseChange) -> Finding:
        return Finding(
            "base-case-changed",
            f"pack {name!r} changes case {change.base.name!r} of {base.name}: {describe(change)}",
            change.base.position,
            "review the change; if it is intended, say so in the pack's own cases",
            self.level,
        )

    @property
    def notices(self) -> list[Finding]:
        """Packs without cases and changed base cases, as findings (warnings; errors with
        --strict)."""
        return [self.no_cases_finding(name) for name in self.without_cases] + [
            self.change_finding(*change) for change in self.changes
        ]

    @property
    def failed(self) -> bool:
        """--strict and something to notice."""
        return self.strict and bool(self.notices)


def describe(change: BaseCaseChange) -> str:
    """What the pack changes in a base case: its outcome and, when decided, its action."""
    outcome = {True: "passed", False: "failed"}
    parts = [f"{outcome[change.base.passed]} under the base, {outcome[change.pack.passed]} here"]
    if change.base.action != change.pack.action:
        parts.append(f"action {change.base.action or '-'} -> {change.pack.action or '-'}")
    return "; ".join(parts)


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
    cases = [
        CiCase(f"rules test {name}", r.name, case_findings(r)) for name, rs in runs.runs for r in rs
    ]
    cases += [
        CiCase(f"rules test {name}", "(no test cases)", [runs.no_cases_finding(name)])
        for name in runs.without_cases
    ]
    cases += [
        CiCase(
            f"rules test {name} --with-base",
            f"{base.name}: {change.base.name}",
            [runs.change_finding(name, base, change)],
        )
        for name, base, change in runs.changes
    ]
    return cases
