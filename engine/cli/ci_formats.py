"""SARIF 2.1.0 and JUnit XML for CI, shared by `rules check` and `rules test`.

Both take ``CiCase`` records: one per pack checked or per pack test case, with the findings
that make it fail (none when it passed). SARIF names every rule of the catalogue
(engine.format.catalogue) that a finding uses, with its description and fix, and gives each
result a fingerprint that does not move when lines do (rule + file + message).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.textio import clean_text
from engine.core.version import VERSION
from engine.format.findings import Finding
from engine.pack.catalogue import describe
from engine.pack.result import CheckResult

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS = {"error": "error", "warning": "warning"}


@dataclass(frozen=True)
class CiCase:
    """One thing CI reports on: a pack checked, or one pack test case."""

    suite: str
    name: str
    findings: Sequence[Finding] = field(default_factory=tuple)

    @property
    def failed(self) -> bool:
        return any(f.level == "error" for f in self.findings)


def check_cases(results: list[CheckResult]) -> list[CiCase]:
    """`rules check` results as CI cases: one per pack."""
    return [CiCase("rules check", r.name or r.target, tuple(r.findings)) for r in results]


def _uri(file: str) -> str:
    """A relative URI for ``file`` when it is under the working folder, else a file URI."""
    path = Path(file)
    if not path.is_absolute():
        return path.as_posix()
    try:
        return (
            Path(os.path.relpath(path)).as_posix()
            if path.is_relative_to(Path.cwd())
            else path.as_uri()
        )
    except ValueError:
        return path.as_uri()


_LINE_COLUMN = re.compile(r":\d+:\d+\b|\bline \d+")


def _fingerprint(finding: Finding) -> str:
    """Stable while lines move: the rule, the file and the message without positions."""
    message = _LINE_COLUMN.sub("", finding.message)
    key = "\0".join([finding.rule, finding.position.file, message])
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _numbered(fingerprint: str, seen: dict[str, int]) -> str:
    """Identical findings in one file (same rule and message at other lines) stay distinct
    results: the n-th repetition carries its number."""
    count = seen.get(fingerprint, 0)
    seen[fingerprint] = count + 1
    return fingerprint if count == 0 else f"{fingerprint}:{count}"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def format_sarif(cases: list[CiCase]) -> str:
    """One SARIF run of tool `rules`: its rules and one result per finding."""
    findings = [f for case in cases for f in case.findings]
    seen: dict[str, int] = {}
    rule_ids = sorted({f.rule for f in findings})
    index = {rule: i for i, rule in enumerate(rule_ids)}
    rules = []
    for rule in rule_ids:
        entry = describe(rule)
        rules.append(
            {
                "id": rule,
                "name": rule,
                "shortDescription": {"text": entry.description},
                "help": {"text": entry.fix},
            }
        )
    results = []
    for f in findings:
        message = f"{f.message} (fix: {f.hint})" if f.hint else f.message
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": SARIF_LEVELS.get(f.level, "note"),
                "message": {"text": clean_text(message)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": clean_text(_uri(f.position.file))},
                            "region": {
                                "startLine": max(f.position.line, 1),
                                "startColumn": max(f.position.column, 1),
                            },
                        }
                    }
                ],
                "partialFingerprints": {"rulesFinding/v1": _numbered(_fingerprint(f), seen)},
            }
        )
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "rules",
                        "version": VERSION,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def format_junit(cases: list[CiCase]) -> str:
    """JUnit XML: a test suite per suite name, a test case per CiCase, a failure element per
    error finding (file:line:column and the message)."""
    root = ET.Element("testsuites", name="rules")
    suites: dict[str, ET.Element] = {}
    for case in cases:
        suite = suites.get(case.suite)
        if suite is None:
            suite = suites[case.suite] = ET.SubElement(root, "testsuite", name=case.suite)
        element = ET.SubElement(
            suite, "testcase", classname=xml_text(case.suite), name=xml_text(case.name)
        )
        errors = [f for f in case.findings if f.level == "error"]
        if errors:
            first = errors[0].position
            element.set("file", xml_text(first.file))
            element.set("line", str(first.line))
        for f in errors:
            failure = ET.SubElement(element, "failure", message=xml_text(f.message), type=f.rule)
            detail = f"{f.position}: {f.message}" + (f"\nfix: {f.hint}" if f.hint else "")
            failure.text = xml_text(detail)
    for name, suite in suites.items():
        members = [c for c in cases if c.suite == name]
        suite.set("tests", str(len(members)))
        suite.set("failures", str(sum(c.failed for c in members)))
    root.set("tests", str(len(cases)))
    root.set("failures", str(sum(c.failed for c in cases)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
