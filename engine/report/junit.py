"""JUnit XML for CI: one writer for `rules check`, `rules test` and `rules backtest`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.pack.result import CheckResult
from engine.report.cases import CiCase, PackTestRuns, check_cases, pack_test_cases

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


@dataclass(frozen=True)
class Failure:
    message: str
    detail: str
    type: str | None = None


@dataclass(frozen=True)
class TestCase:
    """One test case of a suite: failed when it has failures; ``where`` is its file and
    line."""

    __test__ = False  # a data class, not a pytest test

    suite: str
    name: str
    failures: Sequence[Failure] = field(default_factory=tuple)
    where: tuple[str, int] | None = None
    output: str = ""
    """Written as the case's <system-out> (what was noticed, for a case that passed)."""


def junit(cases: Sequence[TestCase], *, name: str = "rules", one_suite: bool = False) -> str:
    """JUnit XML: a test suite per suite name (under <testsuites name=NAME>), or with
    ``one_suite`` a single <testsuite name=NAME> holding every case."""
    root = ET.Element("testsuite" if one_suite else "testsuites", name=name)
    suites: dict[str, ET.Element] = {}
    for case in cases:
        suite = root if one_suite else suites.get(case.suite)
        if suite is None:
            suite = suites[case.suite] = ET.SubElement(root, "testsuite", name=case.suite)
        element = ET.SubElement(
            suite, "testcase", classname=xml_text(case.suite), name=xml_text(case.name)
        )
        if case.where is not None:
            element.set("file", xml_text(case.where[0]))
            element.set("line", str(case.where[1]))
        for failure in case.failures:
            attributes = {"message": xml_text(failure.message)}
            if failure.type is not None:
                attributes["type"] = failure.type
            ET.SubElement(element, "failure", attributes).text = xml_text(failure.detail)
        if case.output:
            ET.SubElement(element, "system-out").text = xml_text(case.output)
    for suite_name, suite in suites.items():
        members = [c for c in cases if c.suite == suite_name]
        suite.set("tests", str(len(members)))
        suite.set("failures", str(sum(bool(c.failures) for c in members)))
    root.set("tests", str(len(cases)))
    root.set("failures", str(sum(bool(c.failures) for c in cases)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def ci_cases(cases: list[CiCase]) -> str:
    """A test case per CiCase, a failure element per error finding (file:line:column and
    the message)."""
    return junit(_cases(cases))


def _cases(cases: list[CiCase]) -> list[TestCase]:
    out = []
    for case in cases:
        errors = [f for f in case.findings if f.level == "error"]
        failures = [
            Failure(
                f.message,
                f"{f.position}: {f.message}" + (f"\nfix: {f.hint}" if f.hint else ""),
                f.rule,
            )
            for f in errors
        ]
        where = (errors[0].position.file, errors[0].position.line) if errors else None
        out.append(TestCase(case.suite, case.name, failures, where))
    return out


def check(results: list[CheckResult]) -> str:
    return ci_cases(check_cases(results))


def test(runs: PackTestRuns) -> str:
    """A test case per case; a pack without cases and (with --with-base) each changed base
    case are test cases too, in a suite of their own: failed with --strict, else passed
    with what was noticed as their output."""
    cases = []
    for case in pack_test_cases(runs):
        notices = [f for f in case.findings if f.level == "warning"]
        if not notices:
            cases.extend(_cases([case]))
            continue
        where = (notices[0].position.file, notices[0].position.line)
        detail = "\n".join(f"{f.position}: {f.message}" for f in notices)
        cases.append(TestCase(case.suite, case.name, (), where, output=detail))
    return junit(cases)


def backtest(report: dict[str, Any]) -> str:
    """One test case per flip kind (failed when it flipped records), so a CI shows them."""
    cases = []
    for kind, count in report["flips"].items():
        examples = report["examples"].get(kind, [])
        detail = "\n".join(
            f"{e['where']}: {e['pack']['error'] or e['baseline']['error'] or ''}" for e in examples
        )
        failure = Failure(f"{count} records flipped {kind}", detail)
        cases.append(TestCase("backtest", kind, [failure] if count else []))
    if not cases:
        cases.append(TestCase("backtest", "no flips"))
    return junit(cases, name="rules backtest", one_suite=True)
