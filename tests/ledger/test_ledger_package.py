"""The ledger package's edges: what it imports, and psycopg only for a PostgreSQL ledger."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import engine.ledger

PACKAGE = Path(engine.ledger.__file__).parent


def test_the_ledger_imports_only_the_core_and_the_standard_library() -> None:
    allowed = ("engine.core", "engine.ledger")
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert name.startswith(allowed) or (
                    top != "engine" and top in sys.stdlib_module_names
                ), f"{path.name} imports {name}"


def test_a_sqlite_ledger_never_loads_psycopg(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from engine.ledger.attempts import Attempts\n"
        "from engine.ledger.connection import open_ledger\n"
        f"with open_ledger({str(tmp_path / 'l.db')!r}) as ledger:\n"
        "    Attempts(ledger).history('', 'B', 'i')\n"
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_a_sqlite_ledger_is_in_wal_mode_with_a_busy_timeout(tmp_path: Path) -> None:
    from engine.ledger.connection import BUSY_TIMEOUT_MS, SQLiteLedger, open_ledger

    with open_ledger(tmp_path / "l.db") as ledger:
        assert isinstance(ledger, SQLiteLedger)
        assert ledger.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert ledger.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    assert (tmp_path / "ledger.lock").exists()
