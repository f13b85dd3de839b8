"""Formatters of backtest reports: pure functions from the report's JSON to text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from engine.cli.ci_formats import xml_text


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items()) or "-"


def _pack_lines(label: str, summary: dict[str, Any]) -> list[str]:
    return [
        f"{label:<9}{summary['ref']}",
        f"  verdicts          {_pairs(summary['status'])}",
        f"  actions           {_pairs(summary['actions'])}",
        f"  failure types     {_pairs(summary['failure_types'])}",
        f"  further attempts  {summary['further_attempts']}",
        *([f"  not evaluated     {summary['errors']}"] if summary["errors"] else []),
    ]


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _printable(text: str) -> str:
    """``text`` for a terminal: control characters (but tab and newline) of records and
    messages written as escapes (\\x1b), so a model's output cannot drive the terminal."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


def format_text(report: dict[str, Any]) -> str:
    """The report for a terminal (its control characters escaped: ``_printable``)."""
    return _printable(_text(report))


def _text(report: dict[str, Any]) -> str:
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
            lines.append(f"  block {block}: {_pairs(counts)}")
        for kind, counts in report["flips_by_failure_type"].items():
            lines.append(f"  {kind} by failure type: {_pairs(counts)}")
        for kind, examples in report["examples"].items():
            for example in examples:
                old, new = example["baseline"], example["pack"]
                why = new["error"] or old["error"] or ""
                lines.append(
                    f"  example {kind}: {example['where']} ({example['block']}"
                    f"{', id ' + str(example['id']) if example['id'] is not None else ''})"
                    f"{': ' + why if why else ''}"
                )
    if report["max_flips"] is not None:
        verdict = "exceeded" if report["flipped"] > report["max_flips"] else "within"
        lines.append(f"max flips {report['max_flips']}: {verdict}")
    return "\n".join(lines) + "\n"


def format_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return out


def format_md(report: dict[str, Any]) -> str:
    summary = report["summary"]
    sides = [("pack", summary["pack"])]
    if "baseline" in summary:
        sides.insert(0, ("baseline", summary["baseline"]))
    lines = ["## Backtest", "", f"{report['total']} records, {report['invalid']} invalid.", ""]
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
    lines += _table(["pack", *keys, *actions, "further attempts"], rows)
    if "baseline" in summary:
        lines += ["", f"**{report['flipped']} records flipped.**", ""]
        flip_rows = [[f"`{kind}`", str(count)] for kind, count in report["flips"].items()]
        lines += _table(["flip", "records"], flip_rows) if flip_rows else ["No flips."]
        if report["flips_by_block"]:
            lines += [""]
            lines += _table(
                ["block", "flips"],
                [[b, _pairs(c)] for b, c in report["flips_by_block"].items()],
            )
    return "\n".join(lines) + "\n"


def format_junit(report: dict[str, Any]) -> str:
    """One test case per flip kind (failed when it flipped records), so a CI shows them."""
    kinds = report["flips"]
    failures = sum(1 for count in kinds.values() if count)
    cases = []
    for kind, count in kinds.items():
        examples = report["examples"].get(kind, [])
        detail = "\n".join(
            f"{e['where']}: {e['pack']['error'] or e['baseline']['error'] or ''}" for e in examples
        )
        cases.append(
            f'  <testcase classname="backtest" name={quoteattr(xml_text(kind))}>\n'
            f"    <failure message={quoteattr(xml_text(f'{count} records flipped {kind}'))}>"
            f"{escape(xml_text(detail))}</failure>\n  </testcase>"
        )
    if not cases:
        cases.append('  <testcase classname="backtest" name="no flips"/>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="rules backtest" tests="{len(cases)}" failures="{failures}">\n'
        + "\n".join(cases)
        + "\n</testsuite>\n"
    )


def format_html(report: dict[str, Any]) -> str:
    from engine.state.report import backtest_page

    return backtest_page(report)


BACKTEST_FORMATS: dict[str, Callable[[dict[str, Any]], str]] = {
    "html": format_html,
    "text": format_text,
    "json": format_json,
    "md": format_md,
    "junit": format_junit,
}
