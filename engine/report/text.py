"""Text for a terminal: findings as file:line:col: [level] message (rule), tables, reports."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.pack.result import CheckResult
from engine.policy.conflicts.statuses import FLAGGED, OPEN
from engine.report import md
from engine.report.cases import PackTestRuns, describe
from engine.report.table import deciding_rules, pairs, text_columns

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.format.findings import Finding
    from engine.pack.compiled import Pack
    from engine.pack.selftests import BaseRun
    from engine.policy.conflicts.runtime import CompiledConflicts
    from engine.policy.triggers.decide import Decision
    from engine.session.explain import Explained


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def finding_line(f: Finding) -> str:
    """One finding as `rules check` prints it (and `rules serve` when a pack is broken)."""
    hint = f" [fix: {f.hint}]" if f.hint else ""
    return f"{f.position}: [{f.level}] {f.message} ({f.rule}){hint}"


def check(results: list[CheckResult]) -> str:
    lines = []
    for result in results:
        lines += [finding_line(f) for f in result.findings]
    errors = sum(1 for r in results for f in r.findings if f.level == "error")
    warnings = sum(1 for r in results for f in r.findings if f.level == "warning")
    summary = (
        f"{_plural(len(results), 'pack')} checked: "
        f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
    )
    return "\n".join([*lines, summary]) + "\n"


def test(runs: PackTestRuns) -> str:
    lines = []
    for name, rs in runs.runs:
        for result in rs:
            mark = "ok  " if result.passed else "FAIL"
            note = " (golden prompt written)" if result.updated else ""
            lines.append(f"{mark} {name}: {result.name}{note}")
            if not result.passed:
                lines.append(f"     {result.position}")
                lines.extend(f"     {problem}" for problem in result.problems)
                if result.diff:
                    lines.append("     " + result.diff.replace("\n", "\n     ").rstrip())
    total = len(runs.results)
    for name, bases in runs.bases.items():
        lines.extend(_base_lines(name, bases, runs.level))
    lines.append(
        f"{_plural(len(runs.runs), 'pack')}, {_plural(total, 'case')}: {runs.passed} passed, "
        f"{total - runs.passed} failed"
        + (f"; {_plural(len(runs.changes), 'base case')} changed" if runs.bases else "")
    )
    return "".join(line + "\n" for line in lines)


def _base_lines(name: str, bases: list[BaseRun], level: str) -> list[str]:
    """The section of `rules test --with-base`: each base's cases run under the pack and
    the ones whose outcome or action the pack changes."""
    mark = "CHANGED" if level == "warning" else "FAIL   "
    lines = [f"base cases under {name} (--with-base):"]
    if not bases:
        lines.append("  (it extends no pack)")
    for base in bases:
        if base.skipped:
            lines.append(f"  {base.name}: not run ({base.skipped})")
            continue
        changed = len(base.changes)
        lines.append(
            f"  {base.name} {base.version}: {_plural(base.cases, 'case')}, {changed} changed"
        )
        for change in base.changes:
            lines.append(f"  {mark} {base.name}: {change.base.name}: {describe(change)}")
            lines.append(f"          {change.base.position}")
            lines.extend(f"          {problem}" for problem in change.pack.problems)
    return lines


def evaluation(verdict: Verdict, decision: Decision, pack: Mapping[str, str] | None = None) -> str:
    """Verdict and decision as a readable two-column table."""
    rows = [("block", verdict.block), ("status", verdict.status)]
    for failure in verdict.failures:
        severity = verdict.severities.get(failure.type, "?")
        rows.append(("failure", f"{failure.type} ({severity}): {failure.message}"))
    rows.extend(("warning", w) for w in verdict.warnings)
    if isinstance(verdict.data, dict) and isinstance(verdict.data.get("ids"), dict):
        for kind, found in verdict.data["ids"].items():
            rows.append((f"{kind} ids", ", ".join(found) or "-"))
    if decision.final:
        progress = f"attempt {decision.attempt}, final"
    else:
        left = decision.attempts_left
        progress = (
            f"attempt {decision.attempt} of {decision.max_attempts}; "
            f"{left} repair{'s' if left != 1 else ''} left after this one"
        )
    rows.append(("action", f"{decision.action} ({progress})"))
    rows.append(("reason", decision.reason))
    rows.append(("rule", decision.rule))
    if decision.limit is not None:
        name = decision.limit["name"] or decision.limit["action"]
        rows.append(("limit", f"{name}: {decision.limit['message']}"))
        if decision.limit["recommendation"]:
            rows.append(("recommend", decision.limit["recommendation"]))
    if decision.default is not None:
        rows.append(("default", json.dumps(decision.default, ensure_ascii=False, allow_nan=False)))
    if decision.log != "none":
        rows.append(("log", decision.log))
    carried = ", ".join(f"{k}={v}" for k, v in decision.carry.items() if v is not None)
    if carried:
        rows.append(("carry", carried))
    width = max(len(name) for name, _ in rows)
    return "".join(f"{name.ljust(width)}  {value}\n" for name, value in rows)


def explain(explained: Explained) -> str:
    """The pack's tables, as markdown reads in a terminal too."""
    return md.explain(explained)


def patterns(rows: list[list[str]]) -> str:
    return md.patterns(rows)


def packs(rows: list[dict[str, Any]]) -> str:
    """The packs as columns: name, address, version, origin."""
    header = ("name", "address", "version", "origin")
    return text_columns(
        [header, *[(r["name"], r["address"], r["version"], r["origin"]) for r in rows]]
    )


def rules(catalogue: Mapping[str, Any]) -> str:
    """Every finding rule with what it means and the fix."""
    width = max(len(k) for k in catalogue)
    return "".join(
        f"{rule:<{width}}  {entry.description} Fix: {entry.fix}\n"
        for rule, entry in sorted(catalogue.items())
    )


def budgets(report: Mapping[str, Any]) -> str:
    """Each budget's spend against its limit, each breaker's state, as columns."""
    session = report["session"] or "(the folder)"
    out = f"pack {report['pack']}, session {session}, at {report['at']}\n"
    if not report["budgets"] and not report["breakers"]:
        return out + "the pack declares no budget and no breaker\n"
    if report["budgets"]:
        header = ("budget", "allows", "spent", "left", "then")
        rows = [
            (
                b["name"],
                b["allows"],
                str(b["spent"])
                + (f" ({b['items_at_limit']} at the limit)" if b["items_at_limit"] else ""),
                str(b["left"]),
                b["action"],
            )
            for b in report["budgets"]
        ]
        out += "\n" + text_columns([header, *rows])
    if report["breakers"]:
        columns = ("breaker", "state", "recent repairs", "good", "opens below", "then")
        states = [
            (
                b["name"],
                b["state"]
                + (f" until {b['cooldown_ends']}" if b["cooldown_ends"] is not None else ""),
                str(b["recent_repairs"]),
                str(b["recent_good"]),
                f"{b['min_success']:.0%} of the last {b['last']}",
                b["action"],
            )
            for b in report["breakers"]
        ]
        out += "\n" + text_columns([columns, *states])
    return out


def gate(payload: Mapping[str, Any]) -> str:
    """The reprompt of a gate's result (nothing when the gate lets the output through)."""
    reprompt: str | None = payload["reprompt"]
    return reprompt or ""


def conflicts(pack: Pack, rules: CompiledConflicts, records: list[dict[str, Any]]) -> str:
    """The open conflicts through the pack's presentation template, then a line per flag
    (an item the output did not address)."""
    shown = [r for r in records if r["status"] == OPEN]
    out = ""
    if shown:
        spec = rules.spec.presentation
        out += pack.render_conflicts(spec, {"conflicts": shown, "total": len(shown)})
    for record in records:
        if record["status"] == FLAGGED:
            out += (
                f"flag {record['ref']} ({record['severity']}): not addressed; "
                f"`rules conflicts convert {record['ref']}` makes it a conflict, "
                f"`rules conflicts waive {record['ref']}` drops it\n"
            )
    return out


def conflict_list(records: list[dict[str, Any]]) -> str:
    """A line per conflict: ref, severity, round, type, status, option labels."""
    out = ""
    for r in records:
        options = "".join(o["label"] for o in r["options"]) or "-"
        out += (
            f"{r['ref']}  {r['severity']:<8} round {r['round']}  {r['type']:<8} "
            f"{r['status']:<8} options {options}\n"
        )
    return out


# --- a backtest -----------------------------------------------------------------------------


def _pack_lines(label: str, summary: dict[str, Any]) -> list[str]:
    return [
        f"{label:<9}{summary['ref']}",
        f"  verdicts          {pairs(summary['status'])}",
        f"  actions           {pairs(summary['actions'])}",
        f"  failure types     {pairs(summary['failure_types'])}",
        f"  further attempts  {summary['further_attempts']}",
        *([f"  not evaluated     {summary['errors']}"] if summary["errors"] else []),
    ]


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` for a terminal: control characters (but tab and newline) of records and
    messages written as escapes (\\x1b), so a model's output cannot drive the terminal."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def backtest(report: dict[str, Any]) -> str:
    """The report for a terminal (its control characters escaped: ``printable``)."""
    return printable(_backtest(report))


def _backtest(report: dict[str, Any]) -> str:
    lines = [f"records  {report['total']}"]
    if report["invalid"]:
        lines.append(f"invalid  {report['invalid']}")
        lines += [f"  {e['where']}: {e['error']}" for e in report["invalid_examples"]]
    summary = report["summary"]
    lines += _pack_lines("pack", summary["pack"])
    if "baseline" in summary:
        lines += _pack_lines("baseline", summary["baseline"])
        lines.append(f"flipped  {report['flipped']}")
        for kind, count in report["flips"].items():
            lines.append(f"  {kind:<28}{count}")
        for block, counts in report["flips_by_block"].items():
            lines.append(f"  block {block}: {pairs(counts)}")
        for kind, counts in report["flips_by_failure_type"].items():
            lines.append(f"  {kind} by failure type: {pairs(counts)}")
        for kind, examples in report["examples"].items():
            for example in examples:
                old, new = example["baseline"], example["pack"]
                why = new["error"] or old["error"] or ""
                lines.append(
                    f"  example {kind}: {example['where']} ({example['block']}"
                    f"{', id ' + str(example['id']) if example['id'] is not None else ''})"
                    f"{': ' + why if why else ''}"
                )
                decided = deciding_rules(example)
                if decided:
                    lines.append(f"    decided by {decided}")
    if report["max_flips"] is not None:
        verdict = "exceeded" if report["flipped"] > report["max_flips"] else "within"
        lines.append(f"max flips {report['max_flips']}: {verdict}")
    return "\n".join(lines) + "\n"
