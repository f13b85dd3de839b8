"""Formatters: pure functions from check results to text."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from engine.format.findings import Finding
from engine.pack.result import CheckResult

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.policy.triggers.decide import Decision
    from engine.policy.triggers.model import Trigger


def format_text(results: list[CheckResult]) -> str:
    lines = []
    for result in results:
        for f in result.findings:
            hint = f" [fix: {f.hint}]" if f.hint else ""
            lines.append(f"{f.position}: [{f.level}] {f.message} ({f.rule}){hint}")
    errors = sum(1 for r in results for f in r.findings if f.level == "error")
    warnings = sum(1 for r in results for f in r.findings if f.level == "warning")
    packs = len(results)
    summary = (
        f"{packs} pack{'s' if packs != 1 else ''} checked: "
        f"{errors} error{'s' if errors != 1 else ''}, "
        f"{warnings} warning{'s' if warnings != 1 else ''}"
    )
    return "\n".join([*lines, summary]) + "\n"


def _finding_json(f: Finding) -> dict[str, object]:
    return {
        "file": f.position.file,
        "line": f.position.line,
        "column": f.position.column,
        "level": f.level,
        "rule": f.rule,
        "message": f.message,
        "hint": f.hint,
    }


def format_json(results: list[CheckResult]) -> str:
    payload = {
        "packs": [
            {
                "pack": r.target,
                "name": r.name,
                "version": r.version,
                "ok": r.ok,
                "findings": [_finding_json(f) for f in r.findings],
            }
            for r in results
        ],
        "errors": sum(1 for r in results for f in r.findings if f.level == "error"),
        "ok": all(r.ok for r in results),
    }
    return json.dumps(payload, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(results: list[CheckResult]) -> str:
    """GitHub Actions workflow commands: one annotation per finding."""
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


def format_sarif_check(results: list[CheckResult]) -> str:
    from engine.cli.ci_formats import check_cases, format_sarif

    return format_sarif(check_cases(results))


def format_junit_check(results: list[CheckResult]) -> str:
    from engine.cli.ci_formats import check_cases, format_junit

    return format_junit(check_cases(results))


FORMATTERS: dict[str, Callable[[list[CheckResult]], str]] = {
    "text": format_text,
    "json": format_json,
    "github": format_github,
    "sarif": format_sarif_check,
    "junit": format_junit_check,
}


def format_evaluation(
    verdict: Verdict,
    decision: Decision,
    output_format: str,
    pack: Mapping[str, str] | None = None,
) -> str:
    """Verdict and decision as a readable table, or as JSON {pack, verdict, decision}
    (``pack``: the name and version of the pack that decided)."""
    if output_format == "json":
        payload = {
            **({"pack": dict(pack)} if pack else {}),
            "verdict": verdict.to_json(),
            "decision": decision.to_json(),
        }
        return json.dumps(payload, ensure_ascii=False, allow_nan=False, indent=2) + "\n"
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
            f"attempt {decision.attempt} of {decision.max_attempts + 1}; "
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


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |\n"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|\n"
    return line(header) + rule + "".join(line(r) for r in rows)


def _after(trigger: Trigger) -> str:
    after = trigger.after_failure
    text = after.action
    if after.default is not None:
        text += f" (default {json.dumps(after.default, ensure_ascii=False, allow_nan=False)})"
    if after.log != "none":
        text += f", log {after.log}"
    return text


def format_explain(pack: Rulepack, block: str | None = None) -> str:
    """The pack's name and version, its trigger table (one row per block), the failure
    types and the actions."""
    from engine.policy.triggers.model import Trigger

    title = f"{pack.rulepack} {pack.version}" + (
        f": {pack.description}" if pack.description else ""
    )

    blocks = [block] if block else list(pack.contracts)
    rows = []
    for name in blocks:
        trigger = pack.triggers.get(name) or Trigger()
        on = ", ".join(trigger.on) or "never (no repair)"
        skip = ", ".join(g.name for g in trigger.skip_when) or "-"
        repair = f"{trigger.action} x{trigger.max_attempts}" if trigger.on else "-"
        rows.append([name, on, repair, trigger.template or "-", skip, _after(trigger)])
    out = title + "\n\n"
    out += _table(["Block", "Repair on", "Then", "Template", "Skip when", "After failure"], rows)
    guards = {
        g.name: g for name in blocks for g in (pack.triggers.get(name) or Trigger()).skip_when
    }
    if guards:
        out += "\nGuards (skip the repair, go straight to the after-failure action):\n"
        out += "".join(
            f"  {g.name}: {g.when}  ({g.reason or 'no reason given'})\n" for g in guards.values()
        )
    types = [
        [n, ft.severity, "yes" if ft.retriable else "no", ft.explain]
        for n, ft in pack.failure_types.items()
    ]
    if types:
        out += "\n" + _table(["Failure type", "Severity", "Retriable", "Explain"], types)
    from engine.format.vocabulary import STANDARD_ACTIONS

    actions = [
        [name, str(spec.exit_code), "yes" if spec.final else "no", spec.description or "-"]
        for name, spec in {**STANDARD_ACTIONS, **pack.actions}.items()
    ]
    out += "\n" + _table(["Action", "Exit", "Final", "Description"], actions)
    for name, menu in pack.menus.items():
        out += f"\nMenu {name} (`rules choose ITEM N`):\n"
        for number, option in enumerate(menu.options, start=1):
            effect = option.effect.model_dump(exclude_defaults=True)
            (kind, value), *_ = effect.items()
            out += f"  {number}. {option.key}: {option.label} -> {kind} {value}\n"
    if pack.rounds is not None and pack.rounds.all_failed is not None:
        failed = pack.rounds.all_failed
        out += (
            f"\nWhen {', '.join(pack.rounds.blocks)} all end a round "
            f"{' or '.join(failed.statuses)}: {failed.action} ({failed.message})\n"
        )
    return out


def format_patterns(pack: Rulepack, block: str | None = None) -> str:
    """Every pattern the pack declares (or block ``block`` declares), with its engine."""
    from engine.core.patterns import pattern_engine
    from engine.format import model
    from engine.format.semantics import walk_references

    rows = []
    seen: set[tuple[str, str]] = set()
    for ref in walk_references(pack, model.Rulepack, (), ()):
        if ref.kind is not model.Ref.PATTERN:
            continue
        if block is not None and ref.path[:2] != ("contracts", block):
            continue
        where = ".".join(str(part) for part in ref.path)
        if (where, ref.value) in seen:
            continue
        seen.add((where, ref.value))
        engine, reason = pattern_engine(ref.value)
        rows.append([ref.value, where, engine, reason])
    if not rows:
        return "no patterns\n"
    return _table(["Pattern", "Where", "Engine", "Why"], rows)
