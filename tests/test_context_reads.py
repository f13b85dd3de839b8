"""`rules check` sees `context.*` (issue 27): a template or condition that reads a context
key the pack does not declare, or a key inside a declared value whose type has none, is a
finding (`undeclared-context-read`) with "did you mean", listed by --list-rules and SARIF."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import PackMaker, run_cli

PACK = """
rulepack: ctx
version: 1.0.0
extends: [builtin:core]
context:
  issue_list: {type: list, items: map}
  ticket: {type: map}
  round: {type: int}
  title: {type: string}
contracts:
  note: {kind: text, min_chars: 5}
triggers:
  note:
    on: [WRONG_FORMAT]
    max_attempts: 1
    action: RETRY
    template: retry
    skip_when:
      - {name: late, when: "context.rounds > 3"}
templates:
  retry: {file: retry.j2, purpose: retry}
"""

TEMPLATE = """Fix it.
{{ context.issue.title }}
{{ context.ticket.owner }} {{ context["round"] }} {{ context.title.upper() }}
{{ context.round.number }}
{% for item in context.issue_list %}{{ item.id }}{% endfor %}
"""


def test_undeclared_and_mistyped_context_reads_are_findings(make_pack: PackMaker) -> None:
    folder = make_pack(PACK, files={"retry.j2": TEMPLATE})
    result = run_cli("check", str(folder), "--format", "json")
    assert result.exit_code == 1, result.output
    (report,) = json.loads(result.stdout)["packs"]
    findings = [f for f in report["findings"] if f["rule"] == "undeclared-context-read"]
    shown = [(f["line"], f["message"], f["hint"]) for f in findings]
    assert shown == [
        (
            18,
            "expression 'context.rounds > 3' reads context.rounds, but the pack declares no "
            "context key 'rounds'",
            "did you mean 'context.round'?",
        ),
        (
            2,
            "template 'retry' reads context.issue.title, but the pack declares no context "
            "key 'issue'",
            "did you mean 'context.issue_list'?",
        ),
        (
            4,
            "template 'retry' reads context.round.number, but context.round is declared int: "
            "it has no key 'number'",
            "read context.round itself, or declare it as a map",
        ),
    ]
    assert findings[0]["file"].endswith("pack.yaml") and findings[1]["file"].endswith("retry.j2")


def test_declared_reads_pass(make_pack: PackMaker) -> None:
    fixed = TEMPLATE.replace("context.issue.title", "context.ticket.title").replace(
        "{{ context.round.number }}", "{{ context.round }}"
    )
    folder = make_pack(PACK.replace("context.rounds", "context.round"), files={"retry.j2": fixed})
    result = run_cli("check", str(folder))
    assert result.exit_code == 0, result.output


def test_the_rule_is_in_the_catalogue_and_in_sarif(make_pack: PackMaker, tmp_path: Path) -> None:
    listed = run_cli("check", "--list-rules", "--format", "json")
    assert "undeclared-context-read" in listed.stdout
    folder = make_pack(PACK, files={"retry.j2": TEMPLATE})
    sarif = json.loads(run_cli("check", str(folder), "--format", "sarif").stdout)
    rules = {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    results = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert "undeclared-context-read" in rules and "undeclared-context-read" in results
