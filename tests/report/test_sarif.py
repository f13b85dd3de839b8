"""CI output: SARIF 2.1.0 and JUnit XML for `rules check` and `rules test`, the rule
catalogue (`rules check --list-rules`) and `rules check --tests`."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, REPO, run_cli
from engine.core.errors import EngineError
from engine.format.findings import FindingRule
from engine.pack.catalogue import rule_catalogue

# The parts of the SARIF 2.1.0 schema (OASIS) this output uses, with its required keys, enums
# and closed objects; written here from the specification, so the test needs no network.
_TEXT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "additionalProperties": False,
    "properties": {
        "$schema": {"type": "string"},
        "version": {"enum": ["2.1.0"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "additionalProperties": False,
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "additionalProperties": False,
                                "properties": {
                                    "name": {"type": "string"},
                                    "version": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "additionalProperties": False,
                                            "properties": {
                                                "id": {"type": "string"},
                                                "name": {"type": "string"},
                                                "shortDescription": _TEXT,
                                                "help": _TEXT,
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "additionalProperties": False,
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "message": _TEXT,
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "additionalProperties": False,
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "additionalProperties": False,
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "additionalProperties": False,
                                                        "properties": {"uri": {"type": "string"}},
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "additionalProperties": False,
                                                        "properties": {
                                                            "startLine": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            },
                                                            "startColumn": {
                                                                "type": "integer",
                                                                "minimum": 1,
                                                            },
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                                "partialFingerprints": {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def many_findings(tmp_path: Path) -> Path:
    copy = tmp_path / "many_findings"
    shutil.copytree(FIXTURES / "packs" / "many_findings", copy)
    return copy


def test_sarif_is_valid_names_its_rules_and_keeps_fingerprints_when_lines_move(
    tmp_path: Path,
) -> None:
    pack = many_findings(tmp_path)
    first = run_cli("check", "--format", "sarif", str(pack))
    assert first.exit_code == 1
    log = json.loads(first.stdout)
    jsonschema.validate(log, SARIF_SUBSET)
    official = os.environ.get("RULES_SARIF_SCHEMA")  # the OASIS schema file, when given
    if official:
        schema = json.loads(Path(official).read_text(encoding="utf-8"))
        jsonschema.Draft4Validator(schema).validate(log)
    run = log["runs"][0]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert len(run["results"]) == 6
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        assert result["ruleId"] in rule_catalogue()
    by_rule = {r["ruleId"]: r for r in run["results"]}
    region = by_rule["unknown-key"]["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (21, 5)
    pack_file = pack / "pack.yaml"
    pack_file.write_text("# a comment\n\n" + pack_file.read_text())
    moved = json.loads(run_cli("check", "--format", "sarif", str(pack)).stdout)["runs"][0]
    again = {r["ruleId"]: r for r in moved["results"]}
    moved_region = again["unknown-key"]["locations"][0]["physicalLocation"]["region"]
    assert moved_region["startLine"] == 23
    assert {k: r["partialFingerprints"] for k, r in again.items()} == {
        k: r["partialFingerprints"] for k, r in by_rule.items()
    }


def test_junit_has_a_testcase_per_pack_and_a_failure_per_error(tmp_path: Path) -> None:
    pack = many_findings(tmp_path)
    result = run_cli("check", "--format", "junit", str(pack), str(REPO / "rules"))
    assert result.exit_code == 1
    root = ET.fromstring(result.stdout)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 6 and root.get("tests") == "6" and root.get("failures") == "1"
    failing = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["many-findings"]
    assert len(failing[0].findall("failure")) == 6
    tested = ET.fromstring(run_cli("test", "--format", "junit", str(REPO / "rules")).stdout)
    assert int(tested.get("tests") or 0) >= 44 and tested.get("failures") == "0"


def test_the_catalogue_lists_every_defined_rule_with_a_description_and_a_fix() -> None:
    catalogue = rule_catalogue()
    assert len(catalogue) > 50
    listed = json.loads(run_cli("check", "--list-rules", "--format", "json").stdout)
    assert [row["id"] for row in listed] == list(catalogue)
    assert all(row["description"] and row["fix"] for row in listed)
    text = run_cli("check", "--list-rules").stdout.splitlines()
    assert [line.split()[0] for line in text] == sorted(catalogue)
    assert all(rule.id == rule_id for rule_id, rule in catalogue.items())


def test_a_rule_id_is_defined_once() -> None:
    (rule_id, known) = next(iter(rule_catalogue().items()))
    assert FindingRule(rule_id, known.description, known.fix, known.level) == known
    with pytest.raises(EngineError, match=f"the finding rule {rule_id!r} is defined twice"):
        FindingRule(rule_id, "another meaning", known.fix)
    assert rule_catalogue()[rule_id] is known


def test_check_tests_runs_the_packs_own_cases(tmp_path: Path) -> None:
    folder = tmp_path / "pack"
    folder.mkdir()
    (folder / "pack.yaml").write_text(
        "rulepack: tiny\nversion: 1.0.0\nextends: [builtin:core]\n"
        "contracts:\n  doc: {kind: text, min_chars: 3}\n"
        "tests:\n  - {name: too short, block: doc, input: x, expect: {status: pass}}\n"
    )
    assert run_cli("check", str(folder)).exit_code == 0
    result = run_cli("check", "--tests", "--format", "json", str(folder))
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)["packs"][0]["findings"]
    assert (finding["rule"], finding["line"]) == ("pack-test-failed", 7)
    assert "test 'too short' failed: status" in finding["message"]


def test_identical_findings_keep_distinct_fingerprints_and_junit_stays_xml() -> None:
    from engine.core.errors import Position
    from engine.format.findings import Finding
    from engine.report.cases import CiCase
    from engine.report.junit import ci_cases as format_junit
    from engine.report.sarif import sarif as format_sarif

    same = [Finding("unknown-key", "unknown key 'x'", Position("p.yaml", n, 3)) for n in (4, 9)]
    odd = Finding("yaml-syntax", "bad \x00 byte \ud800", Position("p\x01.yaml", 1, 1))
    cases = [CiCase("rules check", "p", (*same, odd))]
    sarif = format_sarif(cases)
    sarif.encode("utf-8")  # printable: no lone surrogate left
    results = json.loads(sarif)["runs"][0]["results"]
    assert results[2]["message"]["text"].endswith("byte \ufffd")  # U+FFFD, as everywhere
    prints = [r["partialFingerprints"]["rulesFinding/v1"] for r in results]
    assert len(set(prints)) == 3 and prints[1] == prints[0] + ":1"
    root = ET.fromstring(format_junit(cases))  # well-formed despite NUL, lone surrogate
    assert len(root.findall(".//failure")) == 3
