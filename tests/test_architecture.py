"""The engine knows no pack: no block name and no seed vocabulary in engine/*.py.

Everything specific to a policy (block names, gaps and reviewers, the context keys a seed
reads, its log layouts) lives in the packs under rules/. These tests keep it that way by
searching the engine's source, comments and docstrings included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import engine

ENGINE_DIR = Path(engine.__file__).parent

# The sentinel pack's block names (seed 002).
BLOCK_NAMES = re.compile(r"\b(PLAN|TRACK|SPEC|VERDICT|REFLECT|QA_REVIEW)\b")

# Seed vocabulary, as whole words (``\b``; ``_`` counts as a word character, so ``gap``
# does not fire on an identifier such as ``gap_count``, but does on ``gap-review`` or
# ``GAP-FLOW-001``):
#   gap, gaps                 the gap-review pack's subject (seeds 000, 003)
#   reviewer, engineer        its roles (seeds 000, 003)
#   role                      what seed 003 calls a block; the engine says "block"
#   DISAGREE, issue(s)        a reviewer verdict of seed 001 and what it answers (ISSUE-R1-001)
#   stage                     seed 004's gate stages (the format calls them `gates.steps`)
#   known_gaps, invalid_ids, original_prompt
#                             context keys and template variables of the gap-review pack
# Case-insensitive: "Reviewer" and "GAP" count too.
SEED_WORDS = re.compile(
    r"\b(gaps?|reviewer|engineer|role|DISAGREE|issues?|stage|known_gaps|invalid_ids|"
    r"original_prompt)\b",
    re.IGNORECASE,
)

# Deliberate exceptions: (path under engine/, word) and why.
ALLOWED = {
    # The markdown `refs_exist` check reports the references it could not find as
    # `invalid_ids` in the verdict's data: part of the verdict JSON users read, so renaming
    # it is a behaviour change of its own.
    ("contracts/kinds/markdown/kind.py", "invalid_ids"),
    # `rules gate --stage NAME` and the `stage` key of its JSON result and failure log are
    # named by issue 10 (after seed 004's CLI and gate_result); the command module maps
    # them to the engine's gate name and nothing below the CLI uses the word.
    ("cli/gate.py", "stage"),
    # `POST /v1/gate` takes and answers the documents of `rules gate` (its `stage` field and
    # key), in the one server module that maps them to the engine's gate.
    ("server/gate.py", "stage"),
    # The gate use case builds that result document once for both (its `stage` key, named
    # in one constant, GATE_KEY).
    ("session/gate.py", "stage"),
}


def _hits(pattern: re.Pattern[str]) -> list[str]:
    hits = []
    for path in sorted(ENGINE_DIR.rglob("*.py")):
        where = path.relative_to(ENGINE_DIR).as_posix()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in pattern.finditer(line):
                if (where, match.group(0)) not in ALLOWED:
                    hits.append(f"{where}:{number}: {match.group(0)}")
    return hits


def test_no_block_name_appears_in_engine_code() -> None:
    assert _hits(BLOCK_NAMES) == []


def test_no_seed_vocabulary_appears_in_engine_code() -> None:
    assert _hits(SEED_WORDS) == []


def test_the_patterns_fire_on_what_they_are_for() -> None:
    for text in (
        "GAP-FLOW-001",
        "the gaps",
        "gap-review",
        "Reviewer",
        "role",
        "known_gaps",
        "stage",
        "DISAGREE",
        "ISSUE-R1-001",
        "issues",
    ):
        assert SEED_WORDS.search(text), text
    for text in ("gap_count", "roles_of", "stages", "backstage", "overlap"):
        assert not SEED_WORDS.search(text), text


def test_the_import_contracts_hold() -> None:
    """The layer order, the independence of contract kinds and the absence of import cycles
    are import-linter contracts in pyproject.toml; `lint-imports` checks them."""
    import shutil
    import subprocess
    import sys

    linter = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    root = ENGINE_DIR.parent
    done = subprocess.run(
        [linter, "--config", str(root / "pyproject.toml")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-4000:]


def _module_graph() -> dict[str, set[str]]:
    """Every engine module → the engine modules it imports: at the top, inside functions and
    under ``if TYPE_CHECKING:`` alike (a name imported from a package counts as its module
    when it is one, else as the package)."""
    modules = {}
    for path in ENGINE_DIR.rglob("*.py"):
        parts = ("engine", *path.relative_to(ENGINE_DIR).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                found = known(target) if target.startswith("engine") else None
                if found is not None and found != name:
                    graph[name].add(found)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


# The one circle left (pyproject.toml's ignore_imports says the same): the session package,
# which issue 34's application layer rewrites.
def test_no_module_imports_itself_through_others() -> None:
    """No circle of imports between engine modules, type-only and deferred imports
    included: a circle closed only under ``if TYPE_CHECKING:`` is a circle still."""
    assert _circles(_module_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_every_kind_package_is_registered_and_kept_private() -> None:
    """A kind is a package of engine/contracts/kinds/ plus its line in ``_ENGINE_KINDS``;
    the import-linter contracts name the folder, not the kinds, so nothing else changes."""
    import pytest

    from engine.contracts import registry

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on

    kinds = ENGINE_DIR / "contracts" / "kinds"
    packages = sorted(path.parent.name for path in kinds.glob("*/__init__.py"))
    assert packages == sorted(registry._ENGINE_KINDS)
    assert {package for package, _ in registry._ENGINE_KINDS.values()} == {
        f"engine.contracts.kinds.{name}" for name in packages
    }
    config = tomllib.loads((ENGINE_DIR.parent / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}
    apart = contracts["Contract kinds do not import each other"]["modules"]
    assert apart == ["engine.contracts.kinds.*"]
    private = contracts["Contract kinds are private: others reach them through engine.contracts"]
    assert private["forbidden_modules"] == ["engine.contracts.kinds"]
