"""The table writers of the text formats: markdown tables and aligned text columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _cell(text: str) -> str:
    """A markdown cell: a `|` in it would end the cell, so it is escaped."""
    return text.replace("|", "\\|")


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, aligned: bool = True
) -> str:
    """A markdown table, every row with the header's number of cells (`|` in a cell is
    escaped); ``aligned`` pads the columns to one width for reading as text."""
    cells = [[_cell(c) for c in row] for row in [header, *rows]]
    if not aligned:
        lines = ["| " + " | ".join(row) + " |" for row in cells]
        lines.insert(1, "|" + "---|" * len(header))
        return "".join(line + "\n" for line in lines)
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |\n"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|\n"
    return line(cells[0]) + rule + "".join(line(r) for r in cells[1:])


def text_columns(rows: Sequence[Sequence[str]]) -> str:
    """Rows as columns two spaces apart, each padded to its widest cell."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def pairs(counts: dict[str, int]) -> str:
    """Counts as `key value, key value` (`-` when there are none)."""
    return ", ".join(f"{key} {value}" for key, value in counts.items()) or "-"


def deciding_rules(example: Mapping[str, Any]) -> str:
    """A flip's deciding rules, baseline then pack ("rule r1 -> rule r2"), or one side's
    where only it is known; empty when neither is (a side that could not evaluate, or a
    shadow row recorded without it). Every report format shows the same words."""
    old = example.get("baseline", {}).get("rule")
    new = example.get("pack", {}).get("rule")
    if old and new:
        return f"rule {old} (baseline) -> rule {new} (pack)"
    if new:
        return f"rule {new} (pack)"
    return f"rule {old} (baseline)" if old else ""
