"""Markdown: a pack's tables (`rules explain`) and a backtest report for a pull request."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from engine.report.table import markdown_table, pairs

if TYPE_CHECKING:
    from engine.session.explain import Explained


def _after(after: dict[str, Any]) -> str:
    text = str(after["action"])
    if after["default"] is not None:
        text += f" (default {json.dumps(after['default'], ensure_ascii=False, allow_nan=False)})"
    if after["log"] != "none":
        text += f", log {after['log']}"
    return text


def explain(explained: Explained) -> str:
    """The pack's name and version, its trigger table (one row per block), the guards,
    the failure types, the actions, its menus and what ends a round."""
    pack, tables = explained.model, explained.tables
    title = f"{pack.rulepack} {pack.version}" + (
        f": {pack.description}" if pack.description else ""
    )
    rows = []
    for row in tables["blocks"]:
        on = ", ".join(row["repair_on"]) or "never (no repair)"
        skip = ", ".join(row["skip_when"]) or "-"
        most = row["max_attempts"]
        repair = f"{row['action']}, {most} attempts in all" if row["repair_on"] else "-"
        after = _after(row["after_failure"])
        rows.append([row["block"], on, repair, row["template"] or "-", skip, after])
    out = title + "\n\n"
    out += markdown_table(
        ["Block", "Repair on", "Then", "Template", "Skip when", "After failure"], rows
    )
    if tables["guards"]:
        out += "\nGuards (skip the repair, go straight to the after-failure action):\n"
        out += "".join(
            f"  {g['name']}: {g['when']}  ({g['reason'] or 'no reason given'})\n"
            for g in tables["guards"]
        )
    reasons = [
        (name, pack.triggers[name].after_failure)
        for name in (row["block"] for row in tables["blocks"])
        if name in pack.triggers and pack.triggers[name].after_failure.reason
    ]
    if reasons:
        out += "\nAfter-failure reasons (printed with the final decision):\n"
        out += "".join(f"  {name}: {after.action}: {after.reason}\n" for name, after in reasons)
    types = [
        [t["name"], t["severity"], "yes" if t["retriable"] else "no", t["explain"]]
        for t in tables["failure_types"]
    ]
    if types:
        out += "\n" + markdown_table(["Failure type", "Severity", "Retriable", "Explain"], types)
    actions = [
        [a["name"], str(a["exit_code"]), "yes" if a["final"] else "no", a["description"] or "-"]
        for a in tables["actions"]
    ]
    out += "\n" + markdown_table(["Action", "Exit", "Final", "Description"], actions)
    worst = [
        [
            w["block"],
            str(w["calls"]),
            str(w["repairs"]),
            str(w["transport_retries"]),
            str(w["prompt_chars"]),
            str(w["prompt_tokens"]),
        ]
        for w in tables.get("worst_case", ())
    ]
    if worst:
        out += "\nWorst case per item run (`rules check --prove` checks it):\n"
        out += markdown_table(
            ["Block", "Calls", "Repairs", "Transport retries", "Prompt chars", "Prompt tokens"],
            worst,
        )
    budgets = [
        [
            b["name"],
            (f"a cost of {b['limit']}" if b["counts"] == "cost" else f"{b['limit']} {b['counts']}")
            + (f" per {b['window']}" if b["window"] else ""),
            b["per"],
            ", ".join(b["blocks"]) or "every block",
            b["action"]["action"],
        ]
        for b in tables.get("budgets", ())
    ]
    if budgets:
        out += "\n" + markdown_table(["Budget", "Allows", "Per", "Blocks", "Then"], budgets)
    breakers = [
        [
            b["name"],
            f"below {b['min_success']:.0%} good of the last {b['last']}",
            str(b["cooldown"]),
            ", ".join(b["blocks"]) or "every block",
            ", ".join(b["on"]) or "every failure type",
            b["action"]["action"],
        ]
        for b in tables.get("breakers", ())
    ]
    if breakers:
        out += "\n" + markdown_table(
            ["Breaker", "Opens", "Cooldown", "Blocks", "Failure types", "Then"], breakers
        )
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


def patterns(rows: list[list[str]]) -> str:
    """The pack's patterns (``engine.session.explain.pattern_rows``) as a table."""
    if not rows:
        return "no patterns\n"
    return markdown_table(["Pattern", "Where", "Engine", "Why"], rows)


def backtest(report: dict[str, Any]) -> str:
    summary = report["summary"]
    sides = [("pack", summary["pack"])]
    if "baseline" in summary:
        sides.insert(0, ("baseline", summary["baseline"]))
    out = f"## Backtest\n\n{report['total']} records, {report['invalid']} invalid.\n\n"
    keys = sorted({k for _, s in sides for k in s["status"]} | {"pass", "fail"})
    actions = sorted({k for _, s in sides for k in s["actions"]})
    rows = [
        [
            f"{label} `{s['ref']}`",
            *[str(s["status"].get(k, 0)) for k in keys],
            *[str(s["actions"].get(a, 0)) for a in actions],
            str(s["further_attempts"]),
        ]
        for label, s in sides
    ]
    out += markdown_table(["pack", *keys, *actions, "further attempts"], rows, aligned=False)
    if "baseline" in summary:
        out += f"\n**{report['flipped']} records flipped.**\n\n"
        flip_rows = [[f"`{kind}`", str(count)] for kind, count in report["flips"].items()]
        flips = markdown_table(["flip", "records"], flip_rows, aligned=False)
        out += flips if flip_rows else "No flips.\n"
        if report["flips_by_block"]:
            out += "\n" + markdown_table(
                ["block", "flips"],
                [[b, pairs(c)] for b, c in report["flips_by_block"].items()],
                aligned=False,
            )
    return out
