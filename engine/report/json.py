"""JSON: the results as documents for programs (two-space indent, UTF-8 kept)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.format.findings import Finding
from engine.pack.result import CheckResult
from engine.report.cases import PackTestRuns

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack
    from engine.policy.conflicts.runtime import CompiledConflicts
    from engine.policy.triggers.decide import Decision


def _dump(payload: object) -> str:
    return json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def finding(f: Finding) -> dict[str, object]:
    """A finding as a document (`rules check --format json`, and the server's pack load
    failures)."""
    return {
        "file": f.position.file,
        "line": f.position.line,
        "column": f.position.column,
        "level": f.level,
        "rule": f.rule,
        "message": f.message,
        "hint": f.hint,
    }


def check(results: list[CheckResult]) -> str:
    return _dump(
        {
            "packs": [
                {
                    "pack": r.target,
                    "name": r.name,
                    "version": r.version,
                    "ok": r.ok,
                    "findings": [finding(f) for f in r.findings],
                }
                for r in results
            ],
            "errors": sum(1 for r in results for f in r.findings if f.level == "error"),
            "ok": all(r.ok for r in results),
        }
    )


def test(runs: PackTestRuns) -> str:
    """Each pack's cases (and with --with-base its bases: the cases they ran and the changed
    ones), the totals, and ``notices``: packs without cases and changed base cases, as
    findings (warnings, errors with --strict)."""
    results = runs.results
    packs = []
    for name, rs in runs.runs:
        entry: dict[str, Any] = {
            "pack": name,
            "version": runs.versions[name],
            "cases": [r.to_json() for r in rs],
        }
        if name in runs.bases:
            entry["bases"] = [base.to_json() for base in runs.bases[name]]
        packs.append(entry)
    return _dump(
        {
            "packs": packs,
            "total": len(results),
            "passed": runs.passed,
            "failed": len(results) - runs.passed,
            "pass_rate": runs.pass_rate,
            "notices": [finding(f) for f in runs.notices],
        }
    )


def evaluation(verdict: Verdict, decision: Decision, pack: Mapping[str, str] | None = None) -> str:
    """{pack, verdict, decision} (``pack``: the name and version of the pack that decided)."""
    return _dump(
        {
            **({"pack": dict(pack)} if pack else {}),
            "verdict": verdict.to_json(),
            "decision": decision.to_json(),
        }
    )


def backtest(report: dict[str, Any]) -> str:
    return _dump(report)


def packs(rows: list[dict[str, Any]]) -> str:
    return _dump(rows)


def rules(catalogue: Mapping[str, Any]) -> str:
    """The finding rules: id, description, fix."""
    rows = [{"id": k, "description": r.description, "fix": r.fix} for k, r in catalogue.items()]
    return json.dumps(rows, indent=2, allow_nan=False) + "\n"


def budgets(report: Mapping[str, Any]) -> str:
    """Budgets and breakers (the document GET /v1/budgets answers)."""
    return _dump(report)


def gate(payload: Mapping[str, Any]) -> str:
    """A gate's result (contracts/gate-result.schema.json, as the command names its keys)."""
    return _dump(payload)


def conflicts(pack: Pack, rules: CompiledConflicts, records: list[dict[str, Any]]) -> str:
    """The conflict records, {"conflicts": [...]}."""
    return _dump({"conflicts": records})


def conflict_list(records: list[dict[str, Any]]) -> str:
    return _dump({"conflicts": records})
