"""Markdown output: every table is well formed, whatever its cells hold."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli

CELL_SEPARATOR = re.compile(r"(?<!\\)\|")


def tables(markdown: str) -> list[list[list[str]]]:
    """The tables of ``markdown``: each a list of rows, each a list of its cells (an
    escaped `\\|` is part of a cell, as a markdown renderer reads it)."""
    found: list[list[list[str]]] = []
    previous_was_row = False
    for line in markdown.splitlines():
        is_row = line.startswith("|")
        if is_row:
            cells = [c.strip().replace("\\|", "|") for c in CELL_SEPARATOR.split(line)[1:-1]]
            if not previous_was_row:
                found.append([])
            found[-1].append(cells)
        previous_was_row = is_row
    return found


@pytest.mark.parametrize("patterns", [True, False])
def test_explain_md_tables_have_one_cell_count_per_table(patterns: bool) -> None:
    args = [
        "explain",
        "--pack",
        "sentinel",
        "--format",
        "md",
        *(["--patterns"] if patterns else []),
    ]
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    found = tables(result.stdout)
    assert found
    for table in found:
        header, rule, *rows = table
        assert all(set(cell) <= {"-"} for cell in rule)
        assert [len(row) for row in [rule, *rows]] == [len(header)] * (len(rows) + 1)
    if patterns:
        assert ["unknown field|unknown .* keys"] in [row[:1] for row in found[0]]


def test_explain_text_prints_the_same_markdown_tables() -> None:
    text = run_cli("explain", "--pack", "sentinel", "--patterns").stdout
    md = run_cli("explain", "--pack", "sentinel", "--patterns", "--format", "md").stdout
    assert text == md and "unknown field\\|unknown .* keys" in md
