"""An import inside a function of `engine/` says why it is there.

Imports belong at the top of a module. One is deferred into a function only for start-up time
(`rules --version`, a warm `rules parse`, a command's own start) or for an optional extra, and
then a comment on its line or the line before says so. Consecutive imports of one function
(blank lines between them allowed) form a group: the comment above the first covers it.
An engine module deferred for start-up time says what it costs (measured with
``python -X importtime``), and there are few of them: a design that needs many is one
where a function lives in the wrong module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"

Import = ast.Import | ast.ImportFrom


def deferred_imports(source: str) -> list[Import]:
    """The import statements inside function bodies of ``source``."""
    found: dict[int, Import] = {}
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, Import):
                    found[node.lineno] = node
    return [found[line] for line in sorted(found)]


def uncommented(source: str) -> list[int]:
    """The lines of deferred imports with no comment on their line, the line before, or
    above the first import of their group."""
    lines = source.splitlines()
    imports = deferred_imports(source)
    ending_at = {node.end_lineno: node for node in imports}
    missing = []
    for node in imports:
        current = node
        while True:
            if "#" in lines[current.lineno - 1]:
                break
            before = current.lineno - 1
            if before >= 1 and lines[before - 1].lstrip().startswith("#"):
                break
            while before >= 1 and not lines[before - 1].strip():
                before -= 1  # the blank line between standard and own imports
            if before in ending_at:
                current = ending_at[before]
                continue
            missing.append(node.lineno)
            break
    return missing


def test_every_deferred_import_in_engine_says_why() -> None:
    missing = [
        f"engine/{path.relative_to(ENGINE)}:{line}"
        for path in sorted(ENGINE.rglob("*.py"))
        for line in uncommented(path.read_text(encoding="utf-8"))
    ]
    assert missing == [], (
        "imports inside functions without a comment saying why (start-up time or an "
        "optional extra); move them to the top of the module otherwise: " + ", ".join(missing)
    )


MAX_ENGINE_DEFERRED = 20


def comment_of(lines: list[str], node: Import, imports: list[Import]) -> str:
    """The comment that explains ``node``: on its line, or above the first import of its
    group (``uncommented`` checks that there is one)."""
    ending_at = {other.end_lineno: other for other in imports}
    current = node
    while True:
        if "#" in lines[current.lineno - 1]:
            return lines[current.lineno - 1].split("#", 1)[1]
        before = current.lineno - 1
        comment = []
        while before >= 1 and lines[before - 1].lstrip().startswith("#"):
            comment.insert(0, lines[before - 1].strip().lstrip("#"))
            before -= 1
        if comment:
            return " ".join(comment)
        while before >= 1 and not lines[before - 1].strip():
            before -= 1
        if before not in ending_at:
            return ""
        current = ending_at[before]


def engine_deferred() -> list[tuple[str, str]]:
    """Where each import of an engine module inside a function is, with its comment."""
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        imports = deferred_imports(source)
        for node in imports:
            module = node.names[0].name if isinstance(node, ast.Import) else node.module or ""
            if module.startswith("engine") or (isinstance(node, ast.ImportFrom) and node.level):
                where = f"engine/{path.relative_to(ENGINE)}:{node.lineno}"
                found.append((where, comment_of(source.splitlines(), node, imports)))
    return found


def test_few_engine_imports_are_deferred_and_each_says_its_cost() -> None:
    deferred = engine_deferred()
    assert len(deferred) <= MAX_ENGINE_DEFERRED, (
        f"{len(deferred)} engine imports inside functions (at most {MAX_ENGINE_DEFERRED}): "
        "move them to the top of their modules, or the function to the module that owns it: "
        + ", ".join(where for where, _ in deferred)
    )
    unmeasured = [
        where
        for where, comment in deferred
        if "optional extra" not in comment and not re.search(r"\d+(\.\d+)? ?(ms|s)\b", comment)
    ]
    assert unmeasured == [], (
        "engine imports deferred for start-up time without the time they save "
        "(python -X importtime): " + ", ".join(unmeasured)
    )


def test_the_rule_finds_an_uncommented_import_and_accepts_a_commented_group() -> None:
    source = (
        "import os\n"
        "\n"
        "def bare():\n"
        "    import json\n"
        "\n"
        "def explained():\n"
        "    # Deferred for start-up time: heavy.\n"
        "    import json\n"
        "    import csv\n"
        "\n"
        "    from engine import core\n"
        "    x = 1\n"
        "    import re\n"
        "\n"
        "def trailing():\n"
        "    import json  # optional extra\n"
    )
    assert uncommented(source) == [4, 13]
