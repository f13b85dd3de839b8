"""Formatters: pure functions from check results to text."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine.findings import Finding
from engine.pack import CheckResult


def format_text(results: list[CheckResult]) -> str:
    lines = []
    for result in results:
        for f in result.findings:
            hint = f" [fix: {f.hint}]" if f.hint else ""
            lines.append(f"{f.position}: [{f.level}] {f.message} ({f.rule}){hint}")
    errors = sum(1 for r in results for f in r.findings if f.level == "error")
    warnings = sum(1 for r in results for f in r.findings if f.level == "warning")
    packs = len(results)
    summary = (f"{packs} pack{'s' if packs != 1 else ''} checked: "
               f"{errors} error{'s' if errors != 1 else ''}, "
               f"{warnings} warning{'s' if warnings != 1 else ''}")
    return "\n".join([*lines, summary]) + "\n"


def _finding_json(f: Finding) -> dict[str, object]:
    return {
        "file": f.position.file, "line": f.position.line, "column": f.position.column,
        "level": f.level, "rule": f.rule, "message": f.message, "hint": f.hint,
    }


def format_json(results: list[CheckResult]) -> str:
    payload = {
        "packs": [
            {"pack": r.target, "name": r.model.rulepack if r.model else None, "ok": r.ok,
             "findings": [_finding_json(f) for f in r.findings]}
            for r in results
        ],
        "errors": sum(1 for r in results for f in r.findings if f.level == "error"),
        "ok": all(r.ok for r in results),
    }
    return json.dumps(payload, indent=2, ensure_ascii=False) + "\n"


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


FORMATTERS: dict[str, Callable[[list[CheckResult]], str]] = {
    "text": format_text,
    "json": format_json,
    "github": format_github,
}
