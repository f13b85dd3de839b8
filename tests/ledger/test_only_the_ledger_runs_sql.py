"""Nothing but engine/ledger runs SQL: no module elsewhere in the engine calls a
``.execute(`` (of a connection, a cursor or a transaction) or ``.executescript(``, and
none imports a database driver (the import-linter contract "Only the ledger talks to a
database" in pyproject.toml; tests/test_architecture.py runs the contracts)."""

from __future__ import annotations

import re
from pathlib import Path

import engine

ENGINE_DIR = Path(engine.__file__).parent
LEDGER_DIR = ENGINE_DIR / "ledger"

EXECUTE = re.compile(r"\.execute(many|script)?\(")


def sql_calls(root: Path, allowed: Path) -> list[str]:
    """``path:line`` of every ``.execute(`` call under ``root`` outside ``allowed``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if allowed in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if EXECUTE.search(line):
                found.append(f"{path.relative_to(root)}:{number}")
    return found


def test_no_module_outside_the_ledger_runs_sql() -> None:
    assert sql_calls(ENGINE_DIR, LEDGER_DIR) == []


def test_the_search_finds_sql_where_there_is_some(tmp_path: Path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / "ok.py").write_text('tx.execute("SELECT 1")\n')
    (tmp_path / "use.py").write_text('x = 1\nself.ledger.db.execute("SELECT 1")\n')
    (tmp_path / "many.py").write_text('db.executemany("INSERT", rows)\n')
    assert sql_calls(tmp_path, tmp_path / "ledger") == ["many.py:1", "use.py:2"]
    assert sql_calls(LEDGER_DIR, tmp_path) != []  # the ledger's own modules do run SQL
