"""Choosing a session's ledger: `--ledger URL` (or RULES_LEDGER; the option wins) on the
commands that read or write session state; a SQLite file anywhere, or a PostgreSQL
database where `--session NAME` names a session (no folder); clear errors (exit 2, the
password never shown) when the database cannot be reached, the driver is missing, or the
role may only read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pg_server import PASSWORD, PostgresServer

from conftest import REPO, run_cli

BAD = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")
EVAL = (
    *("eval", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"),
    *("--var", "criterion=AC1", "--format", "json"),
)
UNREACHABLE = f"postgresql://rules:{PASSWORD}@127.0.0.1:1/rules"
SHOWN = "postgresql://rules:***@127.0.0.1:1/rules"


def action(result_stdout: str) -> str:
    return str(json.loads(result_stdout)["decision"]["action"])


def log_rows(*args: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
    shown = run_cli("log", *args, "--format", "json", env=env)
    assert shown.exit_code == 0, shown.stderr
    rows: list[dict[str, object]] = json.loads(shown.stdout)
    return rows


def test_a_sqlite_ledger_anywhere_holds_the_session(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "shared.db"
    other.parent.mkdir()  # a folder outside the working folder is never created silently
    first = run_cli(*EVAL, "--session", "s", "--ledger", str(other), BAD)
    second = run_cli(*EVAL, "--session", "s", "--ledger", f"sqlite:///{other}", BAD)
    assert (action(first.stdout), action(second.stdout)) == ("REPAIR", "NEEDS_HUMAN")
    assert other.is_file() and not (Path("s") / "ledger.sqlite3").exists()
    assert [r["attempt"] for r in log_rows("--session", "s", "--ledger", str(other))] == [1, 2]


def test_the_environment_chooses_the_ledger_and_the_option_wins(tmp_path: Path) -> None:
    env = {"RULES_LEDGER": str(tmp_path / "env.db")}
    assert run_cli(*EVAL, "--session", "s", BAD, env=env).exit_code == 3
    assert (tmp_path / "env.db").is_file()
    assert len(log_rows("--session", "s", env=env)) == 1
    assert run_cli("log", "--session", "s").exit_code == 2  # no ledger in the folder
    chosen = str(tmp_path / "option.db")
    assert run_cli(*EVAL, "--session", "s", "--ledger", chosen, BAD, env=env).exit_code == 3
    assert len(log_rows("--session", "s", "--ledger", chosen, env=env)) == 1
    assert len(log_rows("--session", "s", env=env)) == 1  # the option wrote elsewhere


@pytest.mark.parametrize(
    "args",
    [
        (*EVAL, "--session", "s", BAD),
        ("log", "--session", "s"),
        ("report", "--session", "s"),
        ("export", "--session", "s"),
        ("choose", "--session", "s", "VERDICT", "1"),
        ("conflicts", "list", "--session", "s"),
        ("prompt", "--pack", "sentinel", "--block", "VERDICT", "--session", "s"),
        ("gate", "--pack", "quality-gate", "--stage", "IMPLEMENT", "--session", "s", BAD),
        (
            "run",
            "--pack",
            "sentinel",
            "--block",
            "VERDICT",
            "--session",
            "s",
            "--prompt",
            str(REPO / "examples" / "sentinel" / "task.md"),
            "--",
            "true",
        ),
    ],
)
def test_an_unreachable_server_is_a_clear_error_without_the_password(args: tuple[str, ...]) -> None:
    end = args.index("--") if "--" in args else len(args)
    done = run_cli(*args[:end], "--ledger", UNREACHABLE, *args[end:])
    assert done.exit_code == 2, done.stderr
    assert done.stderr.startswith(f"error: {SHOWN}: cannot connect")
    assert PASSWORD not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert not Path("s").exists()  # a session on a server needs no folder


def test_a_missing_driver_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None; sys.argv = ['rules'] + sys.argv[1:]; "
        "from engine.cli.main import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "log", "--session", "s", "--ledger", UNREACHABLE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'rules-engine[postgres]'" in done.stderr
    assert PASSWORD not in done.stderr and "Traceback" not in done.stderr


def test_sessions_of_a_server_ledger_count_apart(postgres_server: PostgresServer) -> None:
    url = postgres_server.create_database()
    actions = [
        action(run_cli(*EVAL, "--session", name, "--ledger", url, BAD).stdout)
        for name in ("job-1", "job-1", "job-2")
    ]
    assert actions == ["REPAIR", "NEEDS_HUMAN", "REPAIR"]
    assert not Path("job-1").exists() and not Path("job-2").exists()
    assert [r["attempt"] for r in log_rows("--session", "job-1", "--ledger", url)] == [1, 2]
    assert [r["attempt"] for r in log_rows("--session", "job-2", "--ledger", url)] == [1]


@pytest.mark.heavy
def test_a_role_that_may_only_read_reads_and_a_writer_names_the_permission(
    postgres_server: PostgresServer,
) -> None:
    import psycopg

    url = postgres_server.create_database()
    run = ("run", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")
    run += ("--prompt", str(REPO / "examples" / "sentinel" / "task.md"))
    model = ("--", sys.executable, str(REPO / "examples" / "fake_model.py"))
    done = run_cli(*run, "--var", "criterion=AC1", "--keep-outputs", "--session", "j",
                   "--ledger", url, *model)  # fmt: skip
    assert done.exit_code == 0, done.stderr
    reader_pw = "r3ad-only-Xy7"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS ledger_reader")
        conn.execute(f"CREATE ROLE ledger_reader LOGIN PASSWORD '{reader_pw}'")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO ledger_reader")
    reader = url.replace(f"rules:{PASSWORD}@", f"ledger_reader:{reader_pw}@")
    assert [r["attempt"] for r in log_rows("--session", "j", "--ledger", reader)] == [1, 2]
    report = run_cli("report", "--session", "j", "--ledger", reader)
    assert report.exit_code == 0 and "<html" in report.stdout
    exported = run_cli("export", "--session", "j", "--ledger", reader)
    assert exported.exit_code == 0 and len(exported.stdout.splitlines()) == 2
    written = run_cli(*EVAL, "--session", "j", "--ledger", reader, BAD)
    assert written.exit_code == 2
    assert "permission denied for table" in written.stderr and "SELECT only" in written.stderr
    assert reader_pw not in written.stderr and "Traceback" not in written.stderr
