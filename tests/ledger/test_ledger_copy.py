"""Copying sessions between ledgers: SQLite to PostgreSQL and back loses nothing (every
table's rows, ids, blobs byte for byte), a session present in the target is refused unless
replaced, renamed copies and copies onto taken ids keep their references, and later writes
on PostgreSQL do not collide with the copied ids."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest
from pg_server import PASSWORD, PostgresServer

from conftest import REPO
from engine.ledger import LedgerError
from engine.ledger.attempts import Attempt, Attempts, ItemAttempt, KeptOutput
from engine.ledger.connection import Ledger, Tx, open_ledger
from engine.ledger.copy import copy_sessions, read_session, session_tables, sessions
from engine.ledger.shadow import ShadowEvaluation, ShadowLog, Side
from engine.ledger.store import LEDGER_FILE

ATTEMPT = Attempt(
    pack="p",
    status="fail",
    action="REPAIR",
    reason="a field is missing",
    rule="missing",
    final=False,
    output_sha256="a" * 64,
    output_chars=7,
    error="field 'x' is missing",
    nonce="4F2C9A",
)
FINAL = Attempt(**{**ATTEMPT.__dict__, "status": "pass", "action": "PROCEED", "final": True})
# every byte value, and text that is not valid UTF-8 once compressed: blobs as they are
OUTPUT = "héllo \x00 wörld\n" + "".join(map(chr, range(1, 400)))


def populate(ledger: Ledger, session: str) -> None:
    """Rows of ``session`` in every table of the schema."""
    attempts = Attempts(ledger)
    kept = KeptOutput(text=OUTPUT, vars={"criterion": "AC1"}, context={"round": 2})
    attempts.record_attempt(ItemAttempt(session, "VERDICT", "i1", ATTEMPT, ["w1", "w2"], kept))
    attempts.record_attempt(ItemAttempt(session, "VERDICT", "i1", FINAL, [], kept))
    attempts.record_attempt(ItemAttempt(session, "GAP", "i2", ATTEMPT))
    live, candidate = Side("pass", None, "PROCEED", False), Side("fail", "X", "REPAIR", True, "e")
    ShadowLog(ledger).record(
        [ShadowEvaluation("p", "r1", "./next", "r2", "VERDICT", live, candidate, None, True,
                          "<<<VERDICT", session)]
    )  # fmt: skip

    def rest(tx: Tx) -> None:
        first = tx.one("SELECT min(id) FROM attempts WHERE session = ?", (session,))
        assert first is not None
        attempt_id = int(first[0])
        tx.execute(
            "INSERT INTO gate_results (session, ts, pack, gate, retry, valid, action, reason,"
            " checked, errors, reprompt_sha256, artifact) VALUES"
            " (?, 't', 'p', 'g', 1, 0, 'RETRY', 'r', '[]', '[\"e\"]', NULL, 'a.md')",
            (session,),
        )
        for table in ("round_counts", "round_status"):
            value = "3, 10" if table == "round_counts" else "'open'"
            names = "count, total" if table == "round_counts" else "status"
            tx.execute(
                f"INSERT INTO {table} (session, block, round, {names}, ts)"
                f" VALUES (?, 'GAP', 1, {value}, 't')",
                (session,),
            )
        row = tx.one(
            "INSERT INTO conflicts (session, ref, pack, block, type, status, severity, round,"
            " number, fields, options, proposal, created, updated) VALUES"
            " (?, 'C1', 'p', 'GAP', 'contradiction', 'resolved', 'high', 1, 1, '{}', '[]',"
            " NULL, 't', 't') RETURNING id",
            (session,),
        )
        assert row is not None
        tx.execute(
            "INSERT INTO resolutions (conflict_id, option, decision, rationale, constraints,"
            " actions, decided_by, decided_at) VALUES (?, 'A', 'd', 'r', '[]', '[]', 'u', 't')",
            (int(row[0]),),
        )
        tx.execute(
            "INSERT INTO settings (session, key, value) VALUES (?, 'keep_outputs', '1')",
            (session,),
        )
        tx.execute(
            "INSERT INTO choices (attempt_id, ts, block, item, round, option, label, effect,"
            " text) VALUES (?, 't', 'VERDICT', 'i1', NULL, '2', 'Two', 'accept', 'é')",
            (attempt_id,),
        )
        tx.execute(
            "INSERT INTO failed_gates (session, ts, gate, gate_result, reprompt_generated)"
            " VALUES (?, 't', 'g', '{\"valid\": false}', 1)",
            (session,),
        )
        tx.execute(
            "INSERT INTO reviews (session, pack, revision, block, item, run, attempt_id, action,"
            " state, created, due, fallback, on_reject, material, resolution, output,"
            " final_attempt_id) VALUES (?, 'p', 'r1', 'VERDICT', 'i1', 1, ?, 'NEEDS_HUMAN',"
            " 'resolved', 't', 't', 'CYCLE_FAIL', 'CYCLE_FAIL', '{}', 'edited', ?, ?)",
            (session, attempt_id, "é".encode(), attempt_id),
        )

    ledger.write(rest)


def snapshot(location: str, session: str) -> dict[str, list[tuple[object, ...]]]:
    with open_ledger(location) as ledger:
        taken = read_session(ledger, session)
    return {table: sorted(rows, key=repr) for table, (_, rows) in taken.items()}


def copy(source: str, target: str, **options: object) -> list[object]:
    with open_ledger(source) as src, open_ledger(target) as dst:
        return list(copy_sessions(src, dst, **options))  # type: ignore[arg-type]


def test_the_schema_names_every_table_a_session_has_rows_in() -> None:
    names = [t.name for t in session_tables()]
    assert set(names) == {
        "attempts",
        "warnings",
        "kept_outputs",
        "choices",
        "gate_results",
        "failed_gates",
        "round_counts",
        "round_status",
        "conflicts",
        "resolutions",
        "settings",
        "item_counters",
        "shadow_evaluations",
        "reviews",
    }
    assert names.index("attempts") < names.index("warnings")  # referenced tables first
    assert names.index("conflicts") < names.index("resolutions")


def test_a_table_that_belongs_to_no_session_is_refused_by_name() -> None:
    from engine.ledger import schema

    extra = [*schema.MIGRATIONS, ["CREATE TABLE notes (id {id}, text TEXT NOT NULL)"]]
    with pytest.raises(LedgerError, match="notes have no session column"):
        session_tables(extra)
    later = [*schema.MIGRATIONS, ["CREATE TABLE notes (id {id}, {session}, text TEXT)"]]
    assert "notes" in [t.name for t in session_tables(later)]


def test_sqlite_to_postgresql_and_back_keeps_every_row(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    first = str(tmp_path / "a" / "ledger.db")
    with open_ledger(first) as ledger:
        populate(ledger, "")
        populate(ledger, "other")
    original = snapshot(first, "")
    assert all(original.values()), {t: len(r) for t, r in original.items()}  # every table
    server = postgres_server.create_database()
    [done] = copy(first, server, session="")
    back = str(tmp_path / "b" / "ledger.db")
    copy(server, back)
    assert snapshot(server, "") == original
    assert snapshot(back, "") == original
    with open_ledger(back) as ledger:
        assert sessions(ledger) == [""]
        blob = ledger.read(lambda tx: tx.all("SELECT output FROM kept_outputs"))
    assert {zlib.decompress(bytes(b)).decode() for (b,) in blob} == {OUTPUT}
    assert done.rows["attempts"] == 3 and done.moved == {}  # type: ignore[attr-defined]


def test_later_writes_on_postgresql_get_ids_past_the_copied_ones(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    source = str(tmp_path / "a" / "ledger.db")
    with open_ledger(source) as ledger:
        populate(ledger, "")
    server = postgres_server.create_database()
    copy(source, server)
    with open_ledger(server) as ledger:
        populate(ledger, "s2")  # every table written again: no id collides
        assert (
            Attempts(ledger).record_attempt(ItemAttempt("", "VERDICT", "i1", ATTEMPT)) == 1
        )  # its run ended (PROCEED): the next starts run 2
        ids = ledger.read(lambda tx: tx.all("SELECT id FROM attempts ORDER BY id"))
    assert [i for (i,) in ids] == list(range(1, 8))


def test_a_session_already_in_the_target_is_refused_unless_replaced(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        populate(ledger, "s")
        before = read_session(ledger, "s")
        with pytest.raises(LedgerError, match="session 's' already has rows there") as caught:
            copy_sessions(ledger, ledger, session="s")
        assert "--replace" in str(caught.value) and PASSWORD not in str(caught.value)
        assert read_session(ledger, "s") == before  # nothing written
        copy_sessions(ledger, ledger, session="s", replace=True)
        assert read_session(ledger, "s") == before


def test_a_renamed_copy_onto_taken_ids_keeps_its_references(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        populate(ledger, "s")
        [done] = copy_sessions(ledger, ledger, session="s", as_name="t")
        assert done.moved["attempts"] == 3 and done.target == "t"
        assert sessions(ledger) == ["s", "t"]
        history = Attempts(ledger).history("t", "VERDICT", "i1")
        assert [(r["attempt"], r["warnings"]) for r in history] == [(1, ["w1", "w2"]), (2, [])]
        joined = ledger.read(
            lambda tx: tx.all(
                "SELECT a.session, c.option, k.vars FROM choices c JOIN attempts a ON"
                " a.id = c.attempt_id JOIN kept_outputs k ON k.attempt_id = a.id"
                " WHERE a.attempt = 1 ORDER BY a.session"
            )
        )
        assert joined == [("s", "2", '{"criterion": "AC1"}'), ("t", "2", '{"criterion": "AC1"}')]
        assert (
            Attempts(ledger).record_attempt(ItemAttempt("t", "VERDICT", "i1", ATTEMPT)) == 1
        )  # its run ended (PROCEED): the next starts run 2


def test_the_same_rows_copied_twice_under_two_names_get_distinct_write_tokens(
    ledger_url: str, tmp_path: Path
) -> None:
    with open_ledger(tmp_path / "a.db") as source, open_ledger(ledger_url) as target:
        populate(source, "s")
        copy_sessions(source, target, session="s", as_name="u")  # the tokens, kept
        copy_sessions(source, target, session="s")  # the same tokens again: replaced
        tokens = target.read(lambda tx: tx.all("SELECT session, token FROM attempts"))
        assert len({token for _, token in tokens}) == len(tokens) == 6
        assert Counter(session for session, _ in tokens) == {"s": 3, "u": 3}
        columns, original = read_session(source, "s")["attempts"]
        at = columns.index("token")
        assert columns[0] == "id"

        def rest(row: tuple[object, ...]) -> tuple[object, ...]:
            return row[1:at] + row[at + 1 :]

        _, copied = read_session(target, "s")["attempts"]
        # all as it was but the ids (moved past the first copy's) and the tokens
        assert [rest(row) for row in copied] == [rest(row) for row in original]
        assert [row[0] for row in copied] == [row[0] + 3 for row in original]
        assert {row[at] for row in original} == {t for s, t in tokens if s == "u"}


def test_a_new_name_needs_one_session_and_a_missing_one_is_named(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "a.db") as source, open_ledger(tmp_path / "b.db") as target:
        populate(source, "x")
        populate(source, "y")
        with pytest.raises(LedgerError, match=r"holds 2 sessions \('x', 'y'\)"):
            copy_sessions(source, target, as_name="z")
        with pytest.raises(LedgerError, match="no session 'nope' there"):
            copy_sessions(source, target, session="nope")
        assert [c.target for c in copy_sessions(source, target)] == ["x", "y"]


# ------------------------------------------------------------------------------------- CLI


def rules(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RULES, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


RULES = str(Path(sys.executable).with_name("rules"))


@pytest.mark.heavy
def test_the_command_copies_a_session_folder_to_postgresql_and_back(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    folder = tmp_path / "session"
    with open_ledger(folder / LEDGER_FILE) as ledger:
        populate(ledger, "")
    original = snapshot(str(folder / LEDGER_FILE), "")
    server = postgres_server.create_database()
    done = rules("ledger", "copy", "--from", str(folder), "--to", server)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr and "rules:***@" in done.stdout
    assert "3 attempts" in done.stdout and "2 kept_outputs" in done.stdout
    back = tmp_path / "back"
    back.mkdir()  # a folder: its ledger file
    done = rules("ledger", "copy", "--from", server, "--to", str(back))
    assert done.returncode == 0, done.stderr
    assert snapshot(server, "") == original
    assert snapshot(str(back / LEDGER_FILE), "") == original  # every table, blobs as bytes

    again = rules("ledger", "copy", "--from", str(folder), "--to", server)
    assert again.returncode == 2 and "session '' already has rows there" in again.stderr
    assert PASSWORD not in again.stderr and "***" in again.stderr
    renamed = rules("ledger", "copy", "--from", str(folder), "--to", server, "--as", "nightly")
    assert renamed.returncode == 0, renamed.stderr
    assert "moved by +3" in renamed.stdout
    nightly = f"sqlite:///{tmp_path / 'nightly' / 'ledger.db'}"
    done = rules("ledger", "copy", "--from", server, "--to", nightly, "--session", "nightly")
    assert done.returncode == 0, done.stderr
    assert snapshot(nightly, "nightly")["kept_outputs"] == [
        (row[0] + 3, *row[1:]) for row in original["kept_outputs"]
    ]
    replaced = rules("ledger", "copy", "--from", server, "--to", nightly, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert snapshot(nightly, "nightly") == snapshot(server, "nightly")
    assert snapshot(nightly, "") == original


def test_the_command_names_an_unreachable_target_redacted(tmp_path: Path) -> None:
    with open_ledger(tmp_path / "a.db") as ledger:
        populate(ledger, "")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://rules:{PASSWORD}@127.0.0.1:{port}/rules"
    done = rules("ledger", "copy", "--from", str(tmp_path / "a.db"), "--to", url)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: postgresql://rules:***@127.0.0.1:{port}/rules: ")
    assert PASSWORD not in done.stdout + done.stderr


def test_the_command_refuses_a_source_that_does_not_exist(tmp_path: Path) -> None:
    done = rules("ledger", "copy", "--from", str(tmp_path / "none"), "--to", "b.db")
    assert done.returncode == 2 and "no ledger" in done.stderr
    assert not (tmp_path / "none").exists() and not Path("b.db").exists()


def test_the_command_has_examples_in_its_help() -> None:
    done = rules("ledger", "copy", "--help")
    assert done.returncode == 0 and "Examples:" in done.stdout and "--replace" in done.stdout


@pytest.mark.heavy
def test_a_real_session_copied_to_postgresql_and_back_logs_and_exports_the_same(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    folder = tmp_path / "session"
    sentinel = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
    sentinel += ["--var", "criterion=AC1", "--keep-outputs"]
    bad = REPO / "examples" / "sentinel" / "verdict_bad.txt"
    good = REPO / "examples" / "sentinel" / "verdict.txt"
    for output in (bad, bad, good):
        done = rules("eval", "--session", str(folder), *sentinel, str(output))
        assert done.returncode in (0, 1, 3), done.stderr  # pass, final failure, repair
    server = postgres_server.create_database()
    back = tmp_path / "back"
    back.mkdir()
    steps = [
        ("--from", str(folder), "--to", server, "--as", "job-7"),
        ("--from", server, "--session", "job-7", "--to", str(back), "--as", ""),
    ]
    for step in steps:
        done = rules("ledger", "copy", *step)
        assert done.returncode == 0, done.stderr

    def views(*where: str) -> tuple[str, str]:
        log = rules("log", *where, "--format", "json")
        export = rules("export", *where)
        assert log.returncode == export.returncode == 0, log.stderr + export.stderr
        return log.stdout, export.stdout

    original = views("--session", str(folder))
    assert len(json.loads(original[0])) == 3 and original[1].count("\n") == 3
    assert views("--ledger", server, "--session", "job-7") == original
    assert views("--session", str(back)) == original  # kept outputs byte for byte


@pytest.mark.heavy
def test_a_copy_of_a_ledger_being_written_is_one_snapshot(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """Three writers record attempts with warnings while the ledger is copied: each copy
    is the ledger at one instant (every item's counter equals its last attempt, every
    warning's attempt is copied). Read table by table, the counters were ahead of the
    attempts (189 vs 175) and a warning of an attempt read too late failed the copy with a
    message blaming the healthy target."""
    import threading
    import time

    source = postgres_server.create_database()
    with open_ledger(source):
        pass  # created and migrated before the writers start
    stop = threading.Event()
    failures: list[BaseException] = []

    def writer(number: int) -> None:
        try:
            with open_ledger(source) as ledger:
                attempts = Attempts(ledger)
                count = 0
                while not stop.is_set():
                    count += 1
                    item = f"i{count % 4}"
                    attempts.record_attempt(
                        ItemAttempt("s", "VERDICT", item, ATTEMPT, [f"w{number}", "w"])
                    )
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)
        for number in range(6):
            target = str(tmp_path / f"copy{number}.db")
            copy(source, target)
            with open_ledger(target) as ledger:
                counters = dict(
                    ledger.read(lambda tx: tx.all("SELECT item, last FROM item_counters"))
                )
                lasts = dict(
                    ledger.read(
                        lambda tx: tx.all("SELECT item, max(attempt) FROM attempts GROUP BY item")
                    )
                )
                warned = ledger.read(
                    lambda tx: tx.one(
                        "SELECT count(*) FROM warnings WHERE attempt_id NOT IN"
                        " (SELECT id FROM attempts)"
                    )
                )
            assert counters == lasts and counters, (number, counters, lasts)
            assert warned == (0,)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert not failures, failures
