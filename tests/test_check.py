"""`rules check` semantics: one small pack per bad-input case, all findings placed exactly."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from conftest import PackMaker, copy_fixture, run_cli
from engine.pack.loaded import check_pack_file

HEADER = """\
rulepack: t
extends: [builtin:core]
"""


def findings(folder: Path) -> list[tuple[str, str]]:
    result = check_pack_file(folder / "pack.yaml")
    return [
        (f.rule, f"{Path(f.position.file).name}:{f.position.line}:{f.position.column}")
        for f in result.findings
    ]


def test_shipped_packs_are_clean() -> None:
    repo_rules = Path(__file__).resolve().parent.parent / "rules"
    result = run_cli("check", str(repo_rules))
    assert result.exit_code == 0, result.output
    assert " 0 errors" in result.output


def test_six_findings_at_their_places(tmp_path: Path) -> None:
    folder = copy_fixture("many_findings", tmp_path)
    got = findings(folder)
    assert got == [
        ("extends-cycle", "base.yaml:2:11"),
        ("yaml-duplicate-key", "pack.yaml:7:3"),
        ("file-missing", "pack.yaml:11:17"),
        ("invalid-pattern", "pack.yaml:14:12"),
        ("unknown-key", "pack.yaml:21:5"),
        ("unknown-template-variable", "repair.md.j2:4:4"),
    ]


def test_six_findings_in_every_format(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    folder = copy_fixture("many_findings", tmp_path)
    os.chdir(tmp_path)
    text = run_cli("check", "many_findings")
    assert text.exit_code == 1
    assert text.output == snapshot(name="text")
    as_json = run_cli("check", "many_findings", "--format", "json")
    assert as_json.exit_code == 1
    payload = json.loads(as_json.output)
    assert payload["errors"] == 6
    assert payload["packs"][0]["findings"][0]["rule"] == "extends-cycle"
    assert as_json.output == snapshot(name="json")
    github = run_cli("check", "many_findings", "--format", "github")
    assert github.exit_code == 1
    annotation = re.compile(r"^::(error|warning) file=[^,:]+,line=\d+,col=\d+,title=[^,:]+::.+$")
    lines = github.output.splitlines()
    assert len(lines) == 6
    assert all(annotation.match(line) for line in lines), lines
    assert folder.exists()


def test_unknown_key_suggests_the_close_one(make_pack: PackMaker) -> None:
    folder = make_pack(HEADER + "failure_types:\n  X: {severty: HIGH}\n")
    result = check_pack_file(folder / "pack.yaml")
    [finding] = result.findings
    assert finding.rule == "unknown-key"
    assert (finding.position.line, finding.position.column) == (4, 7)
    assert finding.hint == "did you mean 'severity'?"


def test_key_of_another_contract_kind_is_a_finding(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
        contracts:
          doc:
            kind: markdown
            max_chars: 10
        """.replace("        ", "")
    )
    assert findings(folder) == [("unknown-key", "pack.yaml:6:5")]


def test_unknown_kind_and_out_of_range(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  doc: {kind: yaml}
triggers:
  doc: {max_attempts: -1}
"""
    )
    rules = [r for r, _ in findings(folder)]
    assert "unknown-kind" in rules
    assert "out-of-range" in rules


def test_union_errors_collapse_to_the_most_specific(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  doc: {kind: text}
triggers:
  doc: {after_failure: {action: STOP, log: loud}}
"""
    )
    result = check_pack_file(folder / "pack.yaml")
    assert [f.rule for f in result.findings] == ["invalid-value"]
    assert "triggers.doc.after_failure.log" in result.findings[0].message


def test_references_resolve(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  doc: {kind: text, fail: WRONG_FORMT}
triggers:
  dok: {on: [PARSE_ERROR], template: nope, after_failure: GIVE_UP}
"""
    )
    result = check_pack_file(folder / "pack.yaml")
    got = {(f.rule, f.hint) for f in result.findings}
    assert ("unknown-failure-type", "did you mean 'WRONG_FORMAT'?") in got
    assert ("unknown-contract", "did you mean 'doc'?") in got
    assert any(rule == "unknown-template" for rule, _ in got)
    assert any(rule == "unknown-action" for rule, _ in got)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", "path-absolute"),
        ("../outside.md", "path-traversal"),
        ("sub/../../outside.md", "path-traversal"),
        ("missing.md", "file-missing"),
    ],
)
def test_paths_stay_inside_the_pack(make_pack: PackMaker, path: str, rule: str) -> None:
    folder = make_pack(HEADER + f"contracts:\n  doc: {{kind: text, contract_text: '{path}'}}\n")
    assert findings(folder) == [(rule, "pack.yaml:4:36")]


def test_symlink_escape_is_refused(make_pack: PackMaker, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("secret")
    folder = make_pack(HEADER + "contracts:\n  doc: {kind: text, contract_text: link.md}\n")
    (folder / "link.md").symlink_to(outside)
    assert {r for r, _ in findings(folder)} == {"path-escape"}  # the reference and the link


def test_patterns_must_run_on_the_linear_time_engine(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + r"""
hints:
  - {match: '(a)\1', hint: backref}
  - {match: 'ok(?!x)', hint: lookahead}
  - {match: '[unclosed', hint: broken}
  - {match: 'fine \d+', hint: fine}
"""
    )
    result = check_pack_file(folder / "pack.yaml")
    messages = [f.message for f in result.findings]
    assert len(messages) == 3
    assert "\\1" in messages[0]
    assert "(?!" in messages[1]
    assert "missing ]" in messages[2]


def test_expressions_compile_and_use_known_variables(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  doc: {kind: text}
triggers:
  doc:
    skip_when:
      - {name: short, when: "output | length < 50"}
      - {name: crash, when: "error is search('Traceback')"}
      - {name: typo, when: "outptu | length < 50"}
      - {name: broken, when: "output | length <"}
      - {name: nofilter, when: "output | no_such_filter"}
"""
    )
    result = check_pack_file(folder / "pack.yaml")
    got = [(f.rule, f.position.line, f.hint) for f in result.findings]
    assert ("unknown-variable", 10, "did you mean 'output'?") in got
    assert ("invalid-expression", 11, "conditions use Jinja2 expression syntax") in got
    assert ("invalid-expression", 12, "conditions use Jinja2 expression syntax") in got
    assert len(got) == 3


def test_template_syntax_error_points_into_the_template(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER + "templates:\n  r: {file: r.j2, purpose: repair}\n",
        files={"r.j2": "line one\n{{ nonce }\n"},
    )
    assert findings(folder) == [("template-syntax", "r.j2:2:10")]  # the lone }


def test_template_variables_depend_on_the_purpose(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
context:
  team: {type: string}
templates:
  r: {file: r.j2, purpose: repair}
  q: {file: q.j2, purpose: retry}
""",
        files={"r.j2": "{{ nonce }} {{ team }}\n", "q.j2": "{{ nonce }}\n"},
    )
    assert findings(folder) == [("unknown-template-variable", "q.j2:1:4")]


def test_a_variable_set_inside_an_if_branch_is_not_unknown(make_pack: PackMaker) -> None:
    """Jinja's own analysis reports a name set inside {% if %} as read from outside; the
    check leaves such names out and still finds a misspelt variable next to them."""
    template = (
        "{% macro twice(x) %}{% if x %}{% set t %}{{ x }}{{ x }}{% endset %}{{ t }}"
        "{% endif %}{% endmacro %}{{ twice(nonce) }}\n"
        "{% if attempt %}{% set left = max_attempts - attempt %}{{ left }}{% endif %}\n"
        "{{ parser_eror }}\n"
    )
    folder = make_pack(
        HEADER + "templates:\n  r: {file: r.j2, purpose: repair}\n", files={"r.j2": template}
    )
    assert findings(folder) == [("unknown-template-variable", "r.j2:3:4")]


def test_sentinel_contract_references(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  blk:
    kind: sentinel
    opener: "<<<BLK:{crit}>>>"
    closer: "<<<END_BLK:NONCE={nonce}>>>"
    fields:
      A: {form: unquoted, required: true}
    rules:
      - {check: enum, field: B, values: [x]}
    output:
      - {key: a, field: AA}
"""
    )
    rules = [r for r, _ in findings(folder)]
    assert rules == ["delimiter-without-nonce", "unknown-param", "unknown-field", "unknown-field"]


def test_all_findings_of_a_pack_are_reported(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
bogus: 1
failure_types:
  A: {severity: NOPE}
hints:
  - {match: '(?=x)', hint: h}
contracts:
  doc: {kind: text, contract_text: gone.md, pattern: '(?<=y)'}
"""
    )
    rules = sorted(r for r, _ in findings(folder))
    assert rules == [
        "file-missing",
        "invalid-pattern",
        "invalid-pattern",
        "unknown-key",
        "unknown-severity",
    ]


def test_requires_is_compared_with_the_engine_version(make_pack: PackMaker) -> None:
    too_new = make_pack(HEADER + 'requires: ">=99.0"\n', name="new")
    in_range = make_pack(HEADER + 'requires: ">= 0.1, < 99"\n', name="ok")
    assert findings(too_new) == [("requires-unmet", "pack.yaml:3:11")]
    assert findings(in_range) == []
    [finding] = check_pack_file(too_new / "pack.yaml").findings
    assert finding.message.startswith("the pack requires engine >=99.0; this is engine ")


def test_a_packs_tests_run_and_a_failing_case_fails(make_pack: PackMaker) -> None:
    folder = make_pack(
        HEADER
        + """\
contracts:
  doc: {kind: text, min_chars: 3}
tests:
  - {name: long enough, block: doc, input: xyz, expect: {status: pass, action: PROCEED}}
  - {name: too short, block: doc, input: x, expect: {status: pass}}
"""
    )
    result = check_pack_file(folder / "pack.yaml")
    assert result.ok and result.findings == []  # `tests:` acts: no "no-behaviour" warning
    ran = run_cli("test", str(folder), "--format", "json")
    assert ran.exit_code == 1
    cases = json.loads(ran.stdout)["packs"][0]["cases"]
    assert [(c["name"], c["passed"], c["line"]) for c in cases] == [
        ("long enough", True, 6),
        ("too short", False, 7),
    ]
    assert cases[1]["problems"] == ['status: expected "pass", got "fail"']
