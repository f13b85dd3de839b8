"""The ledger: attempts across processes, concurrency without lost rows, bad files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from legacy_ledger import expected, kept_rows, write_legacy
from sentinel_cases import VERDICT_ARGS

import engine
from conftest import REPO, run_cli, run_script, script
from engine.ledger import schema
from engine.ledger.errors import LedgerError
from engine.ledger.legacy import MIGRATIONS
from engine.ledger.store import LEDGER_FILE, SessionLedger, locate
from engine.pack.inputs import OutputInput
from engine.session.recording import Session


def Ledger(folder: Path) -> SessionLedger:
    """The session folder's ledger, opened for writing."""
    return SessionLedger(locate(folder))


BAD = REPO / "examples" / "sentinel" / "verdict_bad.txt"
EVAL = (
    "eval",
    *VERDICT_ARGS,
)


def count(directory: Path) -> int:
    with sqlite3.connect(directory / LEDGER_FILE) as db:
        rows: int = db.execute("SELECT count(*) FROM attempts").fetchone()[0]
    return rows


@pytest.mark.heavy
def test_the_cap_holds_across_processes(tmp_path: Path) -> None:
    """Each process is one output of the item: the second spends the run's one repair and
    ends it; the third starts the item's next run, which the fourth ends the same way."""
    actions = []
    for _ in range(4):
        done = run_script(
            script("rules"), *EVAL, "--session", str(tmp_path / "s"), "--format", "json", str(BAD)
        )
        actions.append(
            (done.returncode, done.stdout.decode().split('"action": "')[1].split('"')[0])
        )
    assert actions == [(3, "REPAIR"), (1, "NEEDS_HUMAN")] * 2
    assert count(tmp_path / "s") == 4


def test_a_new_nonce_is_a_new_item(tmp_path: Path) -> None:
    pack = engine.load_pack("sentinel")
    with Session(pack, tmp_path) as session:
        first = session.evaluate(
            OutputInput("VERDICT", BAD.read_bytes(), nonce="4F2C9A", vars={"criterion": "AC1"})
        )
        other = session.evaluate(
            OutputInput(
                "VERDICT",
                BAD.read_bytes().replace(b"4F2C9A", b"ABCDEF"),
                nonce="ABCDEF",
                vars={"criterion": "AC1"},
            )
        )
    assert (first.decision.attempt, other.decision.attempt) == (1, 1)


WRITER = textwrap.dedent("""
    import sys
    import engine
    from engine.pack.inputs import OutputInput
    from engine.session.recording import Session
    pack = engine.load_pack("sentinel")
    text = open(sys.argv[2], "rb").read()
    with Session(pack, sys.argv[1]) as session:
        for i in range(int(sys.argv[3])):
            session.evaluate(OutputInput("VERDICT", text, nonce="4F2C9A",
                             vars={"criterion": f"AC{sys.argv[4]}x{i}"}, model="m"))
""")


@pytest.mark.slow
def test_eight_processes_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    writer = tmp_path / "writer.py"
    writer.write_text(WRITER)
    session = tmp_path / "session"
    processes = [
        subprocess.Popen(
            [sys.executable, str(writer), str(session), str(BAD), "500", str(n)],
            stderr=subprocess.PIPE,
        )
        for n in range(8)
    ]
    errors = [p.communicate(timeout=600)[1] for p in processes]
    assert [p.returncode for p in processes] == [0] * 8, errors
    assert count(session) == 4000


@pytest.mark.slow
def test_twenty_concurrent_evals_leave_twenty_rows(tmp_path: Path) -> None:
    session = tmp_path / "session"
    processes = [
        subprocess.Popen(
            [script("rules"), *EVAL, "--session", str(session), str(BAD)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(20)
    ]
    errors = [p.communicate(timeout=600)[1] for p in processes]
    # each pair of outputs is one run of the item: a repair, then the final action
    assert sorted(p.returncode for p in processes) == [1] * 10 + [3] * 10, errors
    assert count(session) == 20


def test_corrupt_file_is_refused_and_kept(tmp_path: Path) -> None:
    (tmp_path / LEDGER_FILE).write_bytes(b"not a database at all\x00\xff" * 10)
    before = (tmp_path / LEDGER_FILE).read_bytes()
    done = run_script(script("rules"), *EVAL, "--session", str(tmp_path), str(BAD))
    assert done.returncode == 2
    assert b"not a usable ledger" in done.stderr and b"Traceback" not in done.stderr
    assert (tmp_path / LEDGER_FILE).read_bytes() == before


def test_foreign_sqlite_file_is_refused_and_kept(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        db.execute("CREATE TABLE customers (name TEXT)")
        db.execute("INSERT INTO customers VALUES ('kept')")
    before = (tmp_path / LEDGER_FILE).read_bytes()
    with pytest.raises(LedgerError, match="not a rules ledger"):
        Ledger(tmp_path)
    assert (tmp_path / LEDGER_FILE).read_bytes() == before


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    Ledger(tmp_path).close()
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        db.execute(schema.version_statement(99))
    with pytest.raises(LedgerError, match="newer engine"):
        Ledger(tmp_path)


def test_a_newer_ledger_of_the_earlier_format_is_refused(tmp_path: Path) -> None:
    write_legacy(tmp_path / LEDGER_FILE)
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(LedgerError, match="newer engine"):
        Ledger(tmp_path)
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:  # left as it was
        assert db.execute("PRAGMA user_version").fetchone()[0] == 99
        assert db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 2


def test_records_hold_what_the_seeds_ask_for(tmp_path: Path) -> None:
    pack = engine.load_pack("sentinel")
    with Session(pack, tmp_path) as session:
        session.evaluate(
            OutputInput(
                "VERDICT", BAD.read_bytes(), nonce="4F2C9A", vars={"criterion": "AC1"}, model="m-1"
            )
        )
        [row] = session.ledger.attempts()
    assert row["ts"].endswith("Z") and row["ts"][10] == "T" and len(row["ts"]) == 20
    assert (row["block"], row["attempt"], row["failure_type"], row["action"], row["model"]) == (
        "VERDICT",
        1,
        "PARSE_ERROR",
        "REPAIR",
        "m-1",
    )
    assert len(row["output_sha256"]) == 64


def _as_reader_only(folder: Path) -> list[str]:
    """A command prefix that runs without write access to ``folder``: the folder made
    read-only, and when this test runs as root (who writes anyway) an unprivileged user."""
    for path in [folder, *folder.iterdir()]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to lose write access here")
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, script("rules"), "--version"], capture_output=True, check=False
    )
    if probe.returncode != 0:  # e.g. this checkout sits in a folder only root may enter
        pytest.skip("an unprivileged user cannot run this checkout's rules script")
    return prefix


@pytest.mark.heavy
def test_a_ledger_on_read_only_media_can_be_read_not_written(tmp_path: Path) -> None:
    shared = Path(tempfile.mkdtemp(prefix="rules-ro-"))  # reachable by an unprivileged user
    try:
        shared.chmod(0o755)
        session = shared / "s"
        for expected in (3, 1):  # a repair, then the final failure
            done = run_script(script("rules"), *EVAL, "--session", str(session), str(BAD))
            assert done.returncode == expected, done.stderr
        prefix = _as_reader_only(session)
        env = {**os.environ, "RULES_NO_CACHE": "1"}
        env.pop("RULES_CACHE_DIR", None)

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*prefix, script("rules"), *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=shared,
                timeout=60,
                check=False,
            )

        shown = run("log", "--session", str(session), "--format", "json")
        assert shown.returncode == 0, shown.stderr
        assert [row["attempt"] for row in json.loads(shown.stdout)] == [1, 2]
        report = run("report", "--session", str(session))
        assert report.returncode == 0, report.stderr
        written = run(*EVAL, "--session", str(session), str(BAD))
        assert written.returncode == 2
        assert "needs write access" in written.stderr and "rules log" in written.stderr
        assert "Traceback" not in written.stderr + shown.stderr
    finally:
        for path in [shared, *shared.rglob("*")]:
            path.chmod(0o755)
        shutil.rmtree(shared)


def test_an_older_ledger_is_upgraded_by_a_reader_that_may_write(tmp_path: Path) -> None:
    written = write_legacy(tmp_path / LEDGER_FILE, len(MIGRATIONS) - 1)
    reader = SessionLedger(locate(tmp_path), read_only=True)
    assert [row["attempt"] for row in reader.attempts()] == [1, 2]
    reader.close()
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        assert db.execute("SELECT version FROM ledger_schema").fetchone()[0] == schema.VERSION
    assert kept_rows(tmp_path / LEDGER_FILE, written) == expected(written)


@pytest.mark.parametrize("version", range(1, len(MIGRATIONS) + 1))
def test_a_ledger_of_the_earlier_format_is_converted_keeping_every_row(
    tmp_path: Path, version: int
) -> None:
    """Attempts, warnings, kept outputs, conflicts and resolutions, choices, gates, round
    counts and statuses, settings: every row of an earlier-format ledger of any version is
    in the converted ledger, ids included, as the session of the folder."""
    written = write_legacy(tmp_path / LEDGER_FILE, version)
    Ledger(tmp_path).close()
    assert kept_rows(tmp_path / LEDGER_FILE, written) == expected(written)
    pack = engine.load_pack("sentinel")
    with Session(pack, tmp_path) as session:  # the item's count goes on after its attempts
        outcome = session.evaluate(
            OutputInput("VERDICT", BAD.read_bytes(), nonce="4F2C9A", vars={"criterion": "AC1"})
        )
        assert outcome.decision.attempt == 1  # another item: nonce and params make it
        if version >= 6:
            assert session.keep_outputs  # the setting was kept
        with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
            counters = db.execute("SELECT item, last FROM item_counters ORDER BY item").fetchall()
    assert ('{"i": 1}', 2) in counters
    if version >= 3:  # its gate result is a line of the gate failure log
        with SessionLedger(locate(tmp_path), read_only=True) as ledger:
            assert ledger.failed_gates() == [
                {
                    "timestamp": "2026-01-01T00:00:02Z",
                    "gate_result": {"gate": "IMPLEMENT", "valid": False, "checked": ["todo"],
                                    "errors": ["e"], "action": "REPROMPT", "retry": 0},
                    "reprompt_generated": True,
                }
            ]  # fmt: skip
        shown = run_cli("log", "--session", str(tmp_path), "--format", "jsonl",
                        "--view", "failures")  # fmt: skip
        assert shown.exit_code == 0, shown.stderr
        assert json.loads(shown.stdout.splitlines()[-1]) == {
            "timestamp": "2026-01-01T00:00:02Z",
            "gate_result": {"stage": "IMPLEMENT", "valid": False, "checked": ["todo"],
                            "errors": ["e"], "action": "REPROMPT", "retry": 0},
            "reprompt_generated": True,
        }  # fmt: skip


def test_a_failed_conversion_leaves_the_old_ledger_as_it_was(tmp_path: Path) -> None:
    write_legacy(tmp_path / LEDGER_FILE)
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        db.execute("CREATE TABLE item_counters (x INTEGER)")  # in the way of the new schema
    with pytest.raises(LedgerError):
        Ledger(tmp_path)
    with sqlite3.connect(tmp_path / LEDGER_FILE) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("SELECT count(*) FROM attempts").fetchone()[0] == 2
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert "ledger_schema" not in tables and "legacy_attempts" not in tables
