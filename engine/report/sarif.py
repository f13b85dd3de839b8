"""SARIF 2.1.0 for code scanning, shared by `rules check` and `rules test`.

SARIF names every rule of the catalogue (engine.format.catalogue) that a finding uses, with
its description and fix, and gives each result a fingerprint that does not move when lines
do (rule + file + message).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from engine.core.textio import clean_text
from engine.core.version import VERSION
from engine.format.findings import Finding
from engine.pack.catalogue import describe
from engine.pack.result import CheckResult
from engine.report.cases import CiCase, PackTestRuns, check_cases, pack_test_cases

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVELS = {"error": "error", "warning": "warning"}


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


def _result(f: Finding, index: dict[str, int], seen: dict[str, int]) -> dict[str, object]:
    message = f"{f.message} (fix: {f.hint})" if f.hint else f.message
    return {
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


def sarif(cases: list[CiCase]) -> str:
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
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "rules", "version": VERSION, "rules": rules}},
                "results": [_result(f, index, seen) for f in findings],
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def check(results: list[CheckResult]) -> str:
    return sarif(check_cases(results))


def test(runs: PackTestRuns) -> str:
    return sarif(pack_test_cases(runs))
