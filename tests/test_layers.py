"""The package's shape: stages import only stages below them; contract kinds stay behind
their registry. These tests read the source (ast), so they hold for every import, including
imports inside functions and under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import engine

ENGINE_DIR = Path(engine.__file__).parent

# Lowest first. A module may import its own layer and any layer below it.
LAYERS: list[tuple[str, ...]] = [
    (
        "engine.errors",
        "engine.textio",
        "engine.patterns",
        "engine.resources",
        "engine.placeholders",
        "engine.sandbox",
        "engine.jinja_bounds",
        "engine.conditions",
        "engine.results",
        "engine.verdict",
        "engine.clock",
    ),
    ("engine.format",),
    ("engine.contracts",),
    ("engine.policy",),
    ("engine.prompts",),
    ("engine.pack", "engine.cache"),
    ("engine.state", "engine.batch", "engine.backtest", "engine.packtests"),
    ("engine.cli", "engine.__main__"),
]

CONTRACT_MODELS = {"SentinelContract", "MarkdownContract", "JsonContract", "TextContract"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ENGINE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int | None:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def _engine_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "engine":
                found += [(node.lineno, f"engine.{a.name}") for a in node.names]
            elif node.module.startswith("engine."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("engine.")]
    return found


def _sources() -> list[tuple[str, Path, ast.AST]]:
    return [
        (_module_name(p), p, ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted(ENGINE_DIR.rglob("*.py"))
    ]


def test_every_module_has_a_layer() -> None:
    unplaced = [name for name, _, _ in _sources() if name != "engine" and _layer(name) is None]
    assert unplaced == []


def test_no_module_imports_a_higher_stage() -> None:
    upward = []
    for name, path, tree in _sources():
        if name == "engine":
            continue  # the package root is the public API: it re-exports lazily
        own = _layer(name)
        assert own is not None
        for line, target in _engine_imports(tree):
            rank = _layer(target)
            if rank is not None and rank > own:
                upward.append(f"{path.relative_to(ENGINE_DIR.parent)}:{line}: {name} -> {target}")
    assert upward == []


def test_contract_model_classes_are_used_only_by_their_kinds() -> None:
    outside = []
    for name, path, tree in _sources():
        if name.startswith("engine.contracts") or name == "engine.format.model":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in CONTRACT_MODELS:
                outside.append(f"{path.relative_to(ENGINE_DIR.parent)}:{node.lineno}: {node.id}")
            elif isinstance(node, ast.alias) and node.name in CONTRACT_MODELS:
                outside.append(f"{path.relative_to(ENGINE_DIR.parent)}: imports {node.name}")
    assert outside == []


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    tree = ast.parse("from engine.state.ledger import Ledger\nimport engine.cli.main\n")
    targets = [t for _, t in _engine_imports(tree)]
    assert targets == ["engine.state.ledger", "engine.cli.main"]
    assert [_layer(t) for t in targets] == [6, 7]
    assert _layer("engine.contracts.sentinel.parser") == 2
