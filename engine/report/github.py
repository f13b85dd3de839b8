"""GitHub Actions workflow commands: one annotation per finding or failing case."""

from __future__ import annotations

from engine.pack.result import CheckResult
from engine.report.cases import PackTestRuns


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def check(results: list[CheckResult]) -> str:
    lines = []
    for result in results:
        for f in result.findings:
            message = f"{f.message} [fix: {f.hint}]" if f.hint else f.message
            lines.append(
                f"::{f.level} file={_escape_property(f.position.file)},"
                f"line={f.position.line},col={f.position.column},"
                f"title={_escape_property(f.rule)}::{_escape_data(message)}"
            )
    return "".join(line + "\n" for line in lines)


def test(runs: PackTestRuns) -> str:
    lines = []
    for result in runs.results:
        if not result.passed:
            where = result.position
            message = f"{result.name}: " + "; ".join(result.problems)
            lines.append(
                f"::error file={_escape_property(where.file)},line={where.line},"
                f"col={where.column},title=rules test::{_escape_data(message)}"
            )
    for f in runs.notices:  # packs without cases, changed base cases (--with-base)
        lines.append(
            f"::{f.level} file={_escape_property(f.position.file)},"
            f"line={f.position.line},col={f.position.column},"
            f"title={_escape_property(f.rule)}::{_escape_data(f.message)}"
        )
    return "".join(line + "\n" for line in lines)
