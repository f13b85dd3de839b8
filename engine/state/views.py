"""Views of the ledger, rendered from its rows: seed 003 §9's validation log, seed 000 §8's
example attachment log with source statistics, and JSON / JSONL exports."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

Row = dict[str, Any]

_TIER_NAMES = {"canonical": "Tier 1 (Canonical)", "session": "Tier 2 (Session)",
               "template": "Tier 3 (Template)", "none": "No example"}


def _rounds(rows: Iterable[Row]) -> OrderedDict[int | None, list[Row]]:
    grouped: OrderedDict[int | None, list[Row]] = OrderedDict()
    for row in rows:
        grouped.setdefault(row["round"], []).append(row)
    return grouped


def _items(rows: Iterable[Row]) -> OrderedDict[tuple[str, str], list[Row]]:
    grouped: OrderedDict[tuple[str, str], list[Row]] = OrderedDict()
    for row in rows:
        grouped.setdefault((row["block"], row["item"]), []).append(row)
    return grouped


def _next_of(rows: list[Row], row: Row) -> Row | None:
    later = [r for r in rows if r["block"] == row["block"] and r["item"] == row["item"]
             and r["id"] > row["id"]]
    return later[0] if later else None


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ") if text not in (None, "") else "-"


def validation_log(rows: list[Row]) -> str:
    """Summary per role, detailed log and retry details, one section per round."""
    out: list[str] = []
    for round_number, round_rows in _rounds(rows).items():
        title = f"Round {round_number}" if round_number is not None else "Session"
        out += [f"## {title} Validation Log", "", "### Validation Summary",
                "| Role | Outcome | Attempts | Final Failure Type |",
                "|------|---------|----------|-------------------|"]
        for (block, _), attempts in _items(round_rows).items():
            last = attempts[-1]
            outcome = "SUCCESS" if last["action"] == "PROCEED" else last["action"]
            if last["action"] == "PROCEED":
                final = "N/A (passed on retry)" if len(attempts) > 1 else "N/A"
            else:
                final = last["failure_type"] or "-"
            out.append(f"| {block} | {outcome} | {len(attempts)} | {final} |")
        out += ["", "### Detailed Log", "",
                "| Timestamp | Role | Attempt | Validation | Result | Message |",
                "|-----------|------|---------|------------|--------|---------|"]
        for row in round_rows:
            stamp, block, attempt = row["ts"], row["block"], row["attempt"]
            # rows from before schema 2 have no tier: a failure then counts as structural
            tier = row["validation"] or ("structure" if row["status"] == "fail" else None)
            if tier is None:
                out.append(f"| {stamp} | {block} | {attempt} | Structure | PASS | - |")
                note = "; ".join(row["warnings"]) or row["data_summary"]
                result = "WARN" if row["warnings"] else "PASS"
                out.append(f"| {stamp} | {block} | {attempt} | Content | {result} | "
                           f"{_cell(note)} |")
            elif tier == "content":
                out.append(f"| {stamp} | {block} | {attempt} | Structure | PASS | - |")
                out.append(f"| {stamp} | {block} | {attempt} | Content | FAIL | "
                           f"{_cell(row['error'])} |")
            else:
                out.append(f"| {stamp} | {block} | {attempt} | {tier.capitalize()} | FAIL | "
                           f"{_cell(row['error'])} |")
        retries = [r for r in round_rows if not r["final"]]
        if retries:
            out += ["", "### Retry Details"]
            for row in retries:
                after = _next_of(round_rows, row)
                outcome = ("Pending" if after is None else "Success on retry"
                           if after["action"] == "PROCEED" else f"Failed ({after['action']})")
                out += ["", f"#### {row['block']} Retry {row['attempt']} ({row['ts']})",
                        f"- **Failure Type:** {row['failure_type']}",
                        f"- **Prompt Modification:** {row['modification'] or 'none'}",
                        f"- **Example Attached:** {_example(row)}",
                        f"- **Outcome:** {outcome}"]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n" if out else "No attempts recorded.\n"


def _example(row: Row) -> str:
    tier = row["example_tier"]
    if tier is None or tier == "none":
        return "none"
    return f"{_TIER_NAMES.get(tier, tier)} ({row['example_chars']:,} chars)"


def example_log(rows: list[Row]) -> str:
    """Each retry's example (source, size, truncation, outcome) and statistics per tier."""
    out = ["## Example Attachment Log"]
    uses: OrderedDict[str, list[bool]] = OrderedDict(
        (name, []) for name in ("canonical", "session", "template"))
    for row in rows:
        tier = row["example_tier"]
        if row["final"] or tier is None:
            continue
        after = _next_of(rows, row)
        success = after is not None and after["action"] == "PROCEED"
        outcome = "Pending" if after is None else "Success" if success else "Failed"
        title = f"Round {row['round']} - " if row["round"] is not None else ""
        size = (f"{row['example_chars']:,} chars ({row['example_tokens']:,} tokens)"
                if tier != "none" else "0 chars")
        truncated = (f"Yes (from {row['example_original_chars']:,} chars)"
                     if row["example_truncated"] else "No")
        out += ["", f"### {title}{row['block']} Retry {row['attempt']}",
                f"- **Failure Type:** {row['failure_type']}",
                f"- **Example Source:** {_TIER_NAMES.get(tier, tier)} "
                f"({row['example_source']})",
                f"- **Example Size:** {size}", f"- **Truncated:** {truncated}",
                f"- **Retry Outcome:** {outcome}"]
        if tier in uses and after is not None:
            uses[tier].append(success)
    out += ["", "### Example Source Statistics", "| Source | Uses | Success Rate |",
            "|--------|------|--------------|"]
    for tier, results in uses.items():
        rate = f"{round(100 * sum(results) / len(results))}%" if results else "-"
        out.append(f"| {_TIER_NAMES[tier]} | {len(results)} | {rate} |")
    return "\n".join(out) + "\n"


def as_json(rows: list[Row]) -> str:
    return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"


def as_jsonl(rows: list[Row]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def failures_jsonl(rows: list[Row]) -> str:
    """Seed 004's gate failure log: one line per failed evaluation."""
    lines = []
    for row in rows:
        if row["status"] != "fail":
            continue
        lines.append(json.dumps({
            "timestamp": row["ts"],
            "gate_result": {"stage": row["block"], "action": row["action"],
                            "errors": [row["error"]] if row["error"] else [],
                            "failure_type": row["failure_type"], "retry": row["attempt"] - 1,
                            "round": row["round"]},
            "reprompt_generated": row["prompt_sha256"] is not None,
        }, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)
