"""`rules backtest`: flips between a pack and its baseline over logged records."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
from dask_cluster import dask_cluster
from sentinel_cases import VERDICT_ARGS

from conftest import child_pids, run_cli, still_running
from engine.backtest import BacktestError, backtest, dask_executor, local_executor

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "contracts" / "backtest-report.schema.json").read_text())


def _benchmark() -> ModuleType:
    path = REPO / "benchmarks" / "backtest.py"
    spec = importlib.util.spec_from_file_location("bench_backtest", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_backtest"] = module
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    folder = tmp_path_factory.mktemp("backtest")
    records = folder / "verdicts.jsonl"
    expected = BENCH.generate(records, 2000)
    return records, BENCH.strict_copy(folder), expected


def html_report(records: Path, strict: Path) -> str:
    """The HTML report of the backtest of ``strict`` against the sentinel pack."""
    page = records.parent / "flips.html"
    args = ["backtest", "--pack", str(strict), "--baseline", "sentinel", "--format", "html"]
    result = run_cli(*args, "-o", str(page), str(records))
    assert result.exit_code == 0, result.output
    return page.read_text(encoding="utf-8")


@pytest.mark.heavy
def test_lower_reason_limit_flips_exactly_the_long_reasons(
    generated: tuple[Path, Path, int],
) -> None:
    records, strict, expected = generated
    result = run_cli(
        "backtest",
        "--pack",
        str(strict),
        "--baseline",
        "sentinel",
        "--format",
        "json",
        str(records),
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert expected == 280
    assert report["total"] == 2000
    assert report["flips"] == {"pass->fail": expected, "PROCEED->REPAIR": expected}
    assert report["flipped"] == expected
    assert report["flips_by_block"] == {"VERDICT": report["flips"]}
    assert report["flips_by_failure_type"]["pass->fail"] == {"PARSE_ERROR": expected}
    first = report["examples"]["pass->fail"][0]
    assert first["where"] == f"{records}:4"
    assert first["pack"]["error"] == "REASON exceeds 300 chars"
    assert first["baseline"] == {
        "status": "pass",
        "action": "PROCEED",
        "failure_type": None,
        "error": None,
        "rule": "pass",
    }
    assert first["pack"]["rule"] == "attempt:1"  # the rule that decided the flip's REPAIR
    text = run_cli("backtest", "--pack", str(strict), "--baseline", "sentinel", str(records))
    assert "    decided by rule pass (baseline) -> rule attempt:1 (pack)\n" in text.output
    page = html_report(records, strict)
    assert "decided by rule pass (baseline) -&gt; rule attempt:1 (pack)" in page
    pack, baseline = report["summary"]["pack"], report["summary"]["baseline"]
    unparseable = 2000 // 50
    assert baseline["status"] == {"fail": unparseable, "pass": 2000 - unparseable}
    assert pack["status"] == {"fail": unparseable + expected, "pass": 2000 - unparseable - expected}
    assert pack["further_attempts"] - baseline["further_attempts"] == expected


@pytest.mark.heavy
def test_results_do_not_depend_on_workers_or_chunks(generated: tuple[Path, Path, int]) -> None:
    records, strict, _ = generated
    reports = [
        backtest(
            str(strict),
            [str(records)],
            baseline="sentinel",
            executor=local_executor(workers),
            chunk_bytes=chunk,
        ).to_json()
        for workers, chunk in [(1, 1 << 30), (1, 997), (2, 4096), (2, 65536)]
    ]
    assert all(report == reports[0] for report in reports[1:])
    cli = run_cli(
        "backtest",
        "--pack",
        str(strict),
        "--baseline",
        "sentinel",
        "--workers",
        "2",
        "--format",
        "json",
        str(records),
    )
    assert json.loads(cli.stdout) == reports[0]


def test_max_flips_fails_the_check(generated: tuple[Path, Path, int]) -> None:
    records, strict, expected = generated
    over = run_cli(
        "backtest",
        "--pack",
        str(strict),
        "--baseline",
        "sentinel",
        "--max-flips",
        str(expected - 1),
        str(records),
    )
    assert over.exit_code == 1
    assert f"max flips {expected - 1}: exceeded" in over.stdout
    within = run_cli(
        "backtest",
        "--pack",
        str(strict),
        "--baseline",
        "sentinel",
        "--max-flips",
        str(expected),
        "--format",
        "junit",
        str(records),
    )
    assert within.exit_code == 0
    suite = ET.fromstring(within.stdout)
    assert suite.get("failures") == "2"
    assert {case.get("name") for case in suite} == {"pass->fail", "PROCEED->REPAIR"}


def test_without_baseline_one_pack_statistics(tmp_path: Path) -> None:
    records = REPO / "examples" / "sentinel" / "records.jsonl"
    result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(records))
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert set(report["summary"]) == {"pack"}
    assert report["summary"]["pack"]["status"] == {"fail": 1, "pass": 1}
    assert report["flips"] == {} and report["flipped"] == 0
    md = run_cli("backtest", "--pack", "sentinel", "--format", "md", str(records))
    assert "| pack `sentinel` | 1 | 1 |" in md.stdout


def test_bad_lines_are_reported_with_their_place(tmp_path: Path) -> None:
    records = tmp_path / "mixed.jsonl"
    good = (REPO / "examples" / "sentinel" / "records.jsonl").read_text().splitlines()[0]
    records.write_text(
        "\n".join([good, "{not json", "", '{"block": 3}', '{"block": "NOPE", "text": "x"}', good])
        + "\n"
    )
    result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(records))
    report = json.loads(result.stdout)
    assert report["total"] == 3 and report["invalid"] == 2
    assert [e["where"] for e in report["invalid_examples"]] == [f"{records}:2", f"{records}:4"]
    assert report["summary"]["pack"]["errors"] == 1


def test_bad_record_keys_get_the_messages_of_rules_parse(tmp_path: Path) -> None:
    """block, nonce and vars are checked by one function for backtests and parse --jsonl."""
    records = tmp_path / "bad.jsonl"
    lines = [
        '{"block": "VERDICT", "nonce": 7, "text": "x"}',
        '{"block": "VERDICT", "vars": {"criterion": 1}, "text": "x"}',
        '{"block": "VERDICT", "vars": ["criterion"], "text": "x"}',
    ]
    records.write_text("\n".join(lines) + "\n")
    result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(records))
    errors = [e["error"] for e in json.loads(result.stdout)["invalid_examples"]]
    parsed = run_cli("parse", "--pack", "sentinel", "--jsonl", str(records))
    from_parse = [json.loads(line)["error"] for line in parsed.stdout.splitlines()]
    assert errors == [
        "'nonce' must be a string",
        "'vars' must be an object of strings",
        "'vars' must be an object of strings",
    ]
    assert from_parse == [f"input line {n}: {error}" for n, error in enumerate(errors, 1)]


def test_missing_file_and_bad_pack_are_usage_errors(tmp_path: Path) -> None:
    missing = run_cli("backtest", "--pack", "sentinel", str(tmp_path / "none.jsonl"))
    assert missing.exit_code == 2
    assert "none.jsonl: cannot read" in missing.stderr
    records = REPO / "examples" / "sentinel" / "records.jsonl"
    bad = run_cli("backtest", "--pack", str(tmp_path / "nopack"), str(records))
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ")


FAKE_MODEL = REPO / "examples" / "fake_model.py"


def _run_fake(session: Path, nonce: str, *extra: str, pack: str = "sentinel") -> None:
    result = run_cli(
        "run",
        "--pack",
        pack,
        "--block",
        "VERDICT",
        "--nonce",
        nonce,
        "--var",
        "criterion=AC1",
        "--prompt",
        str(Path(__file__).parent / "fixtures" / "models" / "prompt.txt"),
        "--session",
        str(session),
        *extra,
        "--",
        sys.executable,
        str(FAKE_MODEL),
    )
    assert result.exit_code == 0, result.output


def test_kept_outputs_export_and_backtest(tmp_path: Path) -> None:
    session = tmp_path / "session"
    _run_fake(session, "4F2C9A")  # not kept: the session has not opted in yet
    _run_fake(session, "4F2C9B", "--keep-outputs")
    _run_fake(session, "4F2C9C")  # kept: the session opted in
    exported = run_cli("export", "--session", str(session))
    assert exported.exit_code == 0
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(r["nonce"], r["attempt"]) for r in records] == [
        ("4F2C9B", 1),
        ("4F2C9B", 2),
        ("4F2C9C", 1),
        ("4F2C9C", 2),
    ]
    assert records[1]["text"] == (
        "<<<VERDICT:V1:AC1:NONCE=4F2C9B>>>\nANSWER=YES\n"
        'REASON="All acceptance criteria are satisfied"\n<<<END_VERDICT:AC1:NONCE=4F2C9B>>>\n'
    )
    # the sentinel pack's one context key (the first prompt, empty here) is kept
    assert records[0]["vars"] == {"criterion": "AC1"} and records[0]["context"] == {"task": ""}
    parsed_errors = [
        json.loads(line)["error"]
        for line in run_cli(
            "parse", "--pack", "sentinel", "--jsonl", "-", input=exported.stdout
        ).stdout.splitlines()
    ]
    assert [r["previous_errors"] for r in records] == [
        [],
        [parsed_errors[0]],
        [],
        [parsed_errors[2]],
    ]
    # the export is a valid --jsonl input, and the session folder itself is a RECORDS input
    jsonl = tmp_path / "attempts.jsonl"
    jsonl.write_text(exported.stdout)
    parsed = run_cli("parse", "--pack", "sentinel", "--jsonl", str(jsonl))
    assert [json.loads(line)["ok"] for line in parsed.stdout.splitlines()] == [
        False,
        True,
        False,
        True,
    ]
    from_file = json.loads(
        run_cli("backtest", "--pack", "sentinel", "--format", "json", str(jsonl)).stdout
    )
    from_session = json.loads(
        run_cli("backtest", "--pack", "sentinel", "--format", "json", str(session)).stdout
    )
    assert from_session["summary"] == from_file["summary"]
    assert from_session["summary"]["pack"]["actions"] == {"PROCEED": 2, "REPAIR": 2}


def test_damaged_kept_outputs_are_named_and_the_rest_kept(tmp_path: Path) -> None:
    """A ledger edited by hand: a kept output that is not zlib data, and one that
    decompresses to more than --max-output-bytes (a few kilobytes can hold gigabytes)."""
    import sqlite3
    import zlib

    session = tmp_path / "session"
    _run_fake(session, "4F2C9B", "--keep-outputs")
    _run_fake(session, "4F2C9C", "--keep-outputs")
    db = sqlite3.connect(session / "ledger.sqlite3")
    with db:
        db.execute("UPDATE kept_outputs SET output = ? WHERE attempt_id = 1", (b"not zlib",))
        bomb = zlib.compress(b"A" * 5_000_000, 9)
        db.execute("UPDATE kept_outputs SET output = ? WHERE attempt_id = 3", (bomb,))
    db.close()
    exported = run_cli("export", "--session", str(session), "--max-output-bytes", "1000000")
    assert exported.exit_code == 1
    assert [json.loads(line)["id"] for line in exported.stdout.splitlines()] == [2, 4]
    assert exported.stderr.splitlines() == [
        f"{session}:1: its kept output cannot be read (Error -3 while decompressing data: "
        "incorrect header check); left out",
        f"{session}:3: its kept output cannot be read (longer than 1000000 bytes once "
        "decompressed); left out",
    ]
    report = json.loads(
        run_cli(
            "backtest", "--pack", "sentinel", "--max-output-bytes", "1000000", "--format",
            "json", str(session),
        ).stdout
    )  # fmt: skip
    assert report["total"] == 2 and report["invalid"] == 2
    assert [e["where"] for e in report["invalid_examples"]] == [f"{session}:1", f"{session}:3"]


def test_a_damaged_ledger_is_named_by_every_reader(tmp_path: Path) -> None:
    """The attempts, kept outputs and conflicts tables' first pages overwritten: `rules
    report`, `log`, `export`, `backtest` and `eval --session` name the file and say what to
    do (no internal error)."""
    import sqlite3

    session = tmp_path / "session"
    _run_fake(session, "4F2C9B", "--keep-outputs")
    ledger = session / "ledger.sqlite3"
    db = sqlite3.connect(ledger)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    roots = [
        db.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        for table in ("attempts", "kept_outputs", "conflicts")
    ]
    db.close()
    with ledger.open("r+b") as handle:
        for root in roots:
            handle.seek((root - 1) * page_size)
            handle.write(b"\xff" * 64)
    expected = (
        f"{ledger}: cannot be read (database disk image is malformed); the file is damaged: "
        f"`sqlite3 {ledger} .recover` can save what is left"
    )
    for args in (
        ["report", "--session", str(session), "-o", str(tmp_path / "report.html")],
        ["log", "--session", str(session), "--format", "json"],
        ["log", "--session", str(session), "--view", "decisions"],
        ["export", "--session", str(session)],
        ["backtest", "--pack", "sentinel", str(session)],
        [  # a writer too
            *("eval", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"),
            *("--var", "criterion=AC1", "--session", str(session)),
            str(REPO / "examples" / "sentinel" / "verdict.txt"),
        ],
    ):
        result = run_cli(*args)
        assert result.exit_code == 2, args
        assert result.stderr.strip() == f"error: {expected}", args


CHANGED = (
    "it was changed outside this engine: undo that change, or move the ledger away and "
    "start a new session"
)

HAND_EDITS = [
    ("DROP TABLE attempts", "no such table: attempts"),
    ("DROP TABLE warnings", "no such table: warnings"),
    ("DROP TABLE kept_outputs", "no such table: kept_outputs"),
    ("DROP TABLE choices", "no such table: choices"),
    ("ALTER TABLE attempts RENAME COLUMN status TO stat", "no column status in table attempts"),
    (
        "UPDATE attempts SET attempt = 'x'",
        "attempts row 1: column attempt holds text, not an integer",
    ),
    (
        "UPDATE attempts SET error = x'ff00'",
        "attempts row 1: column error holds bytes, not NULL or text",
    ),
    (
        "UPDATE attempts SET example_tier = 'z', example_chars = 'q'",
        "attempts row 1: column example_chars holds text, not NULL or an integer",
    ),
    (
        "INSERT INTO choices (attempt_id, ts, block, item, option, label, effect) "
        "VALUES (1, 't', 'VERDICT', 'i', 'o', 'l', '{bad')",
        "choices row 1: column effect does not hold JSON text",
    ),
]


@pytest.fixture(scope="module")
def kept_session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    session = tmp_path_factory.mktemp("kept") / "session"
    _run_fake(session, "4F2C9A", "--keep-outputs")  # two attempts, both kept
    return session


@pytest.mark.parametrize(("sql", "problem"), HAND_EDITS)
def test_a_ledger_edited_by_hand_is_named_by_every_reader(
    kept_session: Path, tmp_path: Path, sql: str, problem: str
) -> None:
    """A table dropped, a column renamed, a value of another type, text that is not JSON:
    `rules log` (md, json, jsonl) and `rules report` name the file, the table, row and
    column, and exit 2 (no internal error); the file is left as it is."""
    import shutil
    import sqlite3

    session = tmp_path / "d"
    shutil.copytree(kept_session, session)
    ledger = session / "ledger.sqlite3"
    db = sqlite3.connect(ledger)
    db.executescript(sql)
    db.close()
    before = ledger.read_bytes()
    expected = f"error: {ledger}: not a usable ledger ({problem}); {CHANGED}"
    readers = [
        ["log", "--session", str(session)],
        ["log", "--session", str(session), "--format", "json"],
        ["log", "--session", str(session), "--format", "jsonl"],
        ["report", "--session", str(session), "-o", str(tmp_path / "r.html")],
    ]
    if "attempts SET" not in sql and "choices (" not in sql:  # whole tables: all readers
        readers += [
            ["export", "--session", str(session)],
            ["backtest", "--pack", "sentinel", "--baseline", "sentinel", str(session)],
        ]
    for args in readers:
        result = run_cli(*args)
        assert (result.exit_code, result.stderr.strip()) == (2, expected), args
    assert ledger.read_bytes() == before


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("UPDATE attempts SET attempt = 'x' WHERE id = 1", "column attempt of its attempt"),
        ("UPDATE attempts SET error = x'ff00' WHERE id = 1", "the error of attempt 1 of its"),
        (
            "UPDATE kept_outputs SET context = '" + "[" * 5000 + "]" * 5000 + "' "
            "WHERE attempt_id = 1",
            "its vars or context are nested too deeply",
        ),
    ],
)
def test_a_kept_output_with_a_row_edited_by_hand_is_named_and_left_out(
    kept_session: Path, tmp_path: Path, sql: str, why: str
) -> None:
    """`rules export` names the record whose row cannot be read, leaves it out, writes the
    other and exits 1; `rules backtest` counts it invalid (no internal error)."""
    import shutil
    import sqlite3

    session = tmp_path / "d"
    shutil.copytree(kept_session, session)
    db = sqlite3.connect(session / "ledger.sqlite3")
    db.executescript(sql)
    db.close()
    exported = run_cli("export", "--session", str(session))
    assert exported.exit_code == 1
    damaged = exported.stderr.strip()
    assert damaged.startswith(f"{session}:") and why in damaged and damaged.endswith("left out")
    assert len(exported.stdout.splitlines()) == 1  # of two kept
    report = run_cli(
        "backtest", "--pack", "sentinel", "--baseline", "sentinel", "--format", "json",
        str(session),
    )  # fmt: skip
    assert report.exit_code in (0, 1), report.stderr
    assert json.loads(report.stdout)["invalid"] >= 1


VERDICT_ROW = (
    "  VERDICT:\n    on: [PARSE_ERROR, NONCE_MISMATCH, EMPTY_OUTPUT, NOT_TEXT]\n"
    "    max_attempts: 1\n"
)


def _sentinel_copy(folder: Path, old: str, new: str) -> Path:
    """A copy of the sentinel pack in ``folder`` with ``old`` (found once) in its pack.yaml
    replaced by ``new``."""
    import shutil

    shutil.copytree(REPO / "rules" / "sentinel", folder)
    pack_file = folder / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    pack_file.write_text(text.replace(old, new), encoding="utf-8")
    return folder


def test_a_pack_can_keep_the_outputs_of_every_session(tmp_path: Path) -> None:
    head = "session:\n  prompt: task\n"  # the pack's own session keys, one more added
    pack = _sentinel_copy(tmp_path / "keeping", head, head + "  keep_outputs: true\n")
    assert run_cli("check", str(pack)).exit_code == 0
    _run_fake(tmp_path / "kept", "4F2C9A", pack=str(pack))
    _run_fake(tmp_path / "not-kept", "4F2C9A")
    exported = run_cli("export", "--session", str(tmp_path / "kept"))
    assert [json.loads(line)["attempt"] for line in exported.stdout.splitlines()] == [1, 2]
    assert run_cli("export", "--session", str(tmp_path / "not-kept")).stdout == ""


def test_previous_errors_let_stop_on_repeat_decide(tmp_path: Path) -> None:
    """A record's previous_errors reach the decision: with stop_on_repeat, a failure that
    repeats the last error ends the item instead of asking for another repair."""
    pack = _sentinel_copy(
        tmp_path / "repeat",
        VERDICT_ROW,
        VERDICT_ROW.replace("max_attempts: 1", "max_attempts: 3") + "    stop_on_repeat: true\n",
    )
    output = (
        '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER="YES"\nREASON="quoted answer"\n'
        "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>"
    )
    base = {"block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}, "text": output}
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            json.dumps({**base, "attempt": 2, "previous_errors": previous}) + "\n"
            for previous in (["line 2: ANSWER must be unquoted"], ["another error"], [])
        )
        + json.dumps({**base, "previous_errors": "not a list"})
        + "\n"
    )
    result = run_cli(
        "backtest", "--pack", str(pack), "--baseline", "sentinel", "--format", "json", str(records)
    )
    report = json.loads(result.stdout)
    assert report["summary"]["pack"]["actions"] == {"NEEDS_HUMAN": 1, "REPAIR": 2}
    assert report["summary"]["baseline"]["actions"] == {"NEEDS_HUMAN": 3}  # 1 repair used
    assert report["invalid"] == 1
    assert "'previous_errors' must be a list of strings" in report["invalid_examples"][0]["error"]


def test_session_without_kept_outputs_is_a_clear_error(tmp_path: Path) -> None:
    session = tmp_path / "session"
    _run_fake(session, "4F2C9A")
    result = run_cli("backtest", "--pack", "sentinel", str(session))
    assert result.exit_code == 2
    assert "kept no outputs (run it with --keep-outputs, or give the pack" in result.stderr
    assert run_cli("export", "--session", str(tmp_path / "nothing")).exit_code == 2
    plain = run_cli(
        "eval",
        *VERDICT_ARGS,
        "--keep-outputs",
        str(REPO / "examples" / "sentinel" / "verdict.txt"),
    )
    assert plain.exit_code == 2 and "--keep-outputs needs --session" in plain.stderr


@pytest.mark.slow
def test_dask_local_cluster_gives_the_local_report(generated: tuple[Path, Path, int]) -> None:
    pytest.importorskip(
        "distributed", reason="Dask is not installed (pip install -e '.[dev,dask]')"
    )
    records, strict, expected = generated
    args = ["backtest", "--pack", str(strict), "--baseline", "sentinel", "--format", "json"]
    local = run_cli(*args, "--workers", "2", str(records))
    dask = run_cli(*args, "--executor", "dask", "--workers", "2", str(records))
    assert dask.exit_code == 0, dask.output
    assert json.loads(dask.stdout) == json.loads(local.stdout)
    assert json.loads(dask.stdout)["flips"]["pass->fail"] == expected
    # the same with chunks small enough that every worker gets several
    report = backtest(
        str(strict),
        [str(records)],
        baseline="sentinel",
        chunk_bytes=8192,
        executor=dask_executor(None, 2),
    ).to_json()
    assert report == json.loads(local.stdout)


@pytest.mark.slow
def test_dask_cluster_started_apart_gives_the_local_report(
    generated: tuple[Path, Path, int], tmp_path: Path
) -> None:
    """--scheduler ADDRESS reaches a cluster over TCP; the report is the local one."""
    pytest.importorskip(
        "distributed", reason="Dask is not installed (pip install -e '.[dev,dask]')"
    )
    records, strict, expected = generated
    args = ["backtest", "--pack", str(strict), "--baseline", "sentinel", "--format", "json"]
    local = run_cli(*args, str(records))
    with dask_cluster(tmp_path) as address:
        remote = run_cli(*args, "--executor", "dask", "--scheduler", address, str(records))
    assert remote.exit_code == 0, remote.output
    assert json.loads(remote.stdout) == json.loads(local.stdout)
    assert json.loads(remote.stdout)["flips"]["pass->fail"] == expected


@pytest.mark.slow
def test_dask_workers_without_this_engine_are_a_clear_error(tmp_path: Path) -> None:
    """Workers that import another `engine` leave the cluster at their first task; the
    backtest says so instead of waiting forever."""
    pytest.importorskip(
        "distributed", reason="Dask is not installed (pip install -e '.[dev,dask]')"
    )
    other = tmp_path / "other" / "engine"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(other.parent)}
    records = REPO / "examples" / "sentinel" / "records.jsonl"
    with dask_cluster(tmp_path, env) as address:
        started = time.monotonic()
        with pytest.raises(BacktestError, match="the cluster has had no worker for 5 s"):
            backtest(
                "sentinel", [str(records)], executor=dask_executor(address, no_workers_seconds=5)
            )
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_unreachable_scheduler_says_what_to_do() -> None:
    dask = pytest.importorskip(
        "dask", reason="Dask is not installed (pip install -e '.[dev,dask]')"
    )
    records = REPO / "examples" / "sentinel" / "records.jsonl"
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "2s"}),
        pytest.raises(BacktestError, match=r"scheduler tcp://127\.0\.0\.1:1: .* Start one"),
    ):
        backtest("sentinel", [str(records)], executor=dask_executor("tcp://127.0.0.1:1"))


def _verdict_line(reason: str) -> str:
    text = (
        "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n"
        f'REASON="{reason}"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>'
    )
    record = {"block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}, "text": text}
    return json.dumps(record) + "\n"


def test_a_line_over_the_cap_is_an_invalid_record_whatever_the_chunks(tmp_path: Path) -> None:
    """A record line longer than --max-output-bytes is reported (file:line) and not read;
    the records around it count, for any chunk size (the long line spans many chunks)."""
    records = tmp_path / "records.jsonl"
    lines = [_verdict_line("short"), _verdict_line("x" * 5000), "\n", _verdict_line("ok")]
    records.write_text("".join(lines) + _verdict_line("last").rstrip("\n"), encoding="utf-8")
    reports = [
        backtest("sentinel", [str(records)], chunk_bytes=chunk, max_line_bytes=1000).to_json()
        for chunk in (1 << 20, 1, 7, 64, 999, 1000, 1001)
    ]
    assert all(report == reports[0] for report in reports[1:])
    assert reports[0]["total"] == 3 and reports[0]["invalid"] == 1
    assert reports[0]["invalid_examples"] == [
        {
            "error": "longer than 1000 bytes; not read (--max-output-bytes)",
            "where": f"{records}:2",
        }
    ]
    assert reports[0]["summary"]["pack"]["status"] == {"pass": 3}
    cli = run_cli(
        "backtest", "--pack", "sentinel", "--max-output-bytes", "1000", "--format", "json",
        str(records),
    )  # fmt: skip
    assert json.loads(cli.stdout) == reports[0]
    whole = backtest("sentinel", [str(records)], chunk_bytes=7).to_json()
    assert whole["invalid"] == 0  # read whole: its 5000-char reason is over REASON's 500
    assert whole["summary"]["pack"]["status"] == {"pass": 3, "fail": 1}


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_a_chunk_reads_about_its_own_size_of_a_long_line(tmp_path: Path) -> None:
    """A chunk inside a line that began before it reads up to its own end and stops (it
    used to read the rest of the line: quadratic in the line's length)."""
    from engine.backtest import SKIP_BYTES, Chunk, read_chunk

    records = tmp_path / "records.jsonl"
    records.write_text(_verdict_line("x" * 20_000_000), encoding="utf-8")

    def bytes_read() -> int:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        raise AssertionError("no rchar in /proc/self/io")

    before = bytes_read()
    middle = list(read_chunk(Chunk(1, str(records), 5_000_000, 6_000_000, first=False)))
    read = bytes_read() - before
    assert middle == []
    assert read <= 1_000_000 + 2 * SKIP_BYTES
    [whole] = read_chunk(Chunk(0, str(records), 0, 1_000_000), max_line_bytes=2_000_000)
    assert str(whole) == "longer than 2000000 bytes; not read (--max-output-bytes)"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_a_worker_that_dies_ends_the_backtest_with_an_error(tmp_path: Path) -> None:
    """A worker killed mid-run (as the out-of-memory killer would): the backtest says so
    and exits 2 (multiprocessing.Pool waited forever for the lost chunk)."""
    records = tmp_path / "records.jsonl"
    BENCH.generate(records, 200_000)
    command = [sys.executable, "-m", "engine", "backtest", "--pack", "sentinel"]
    process = subprocess.Popen(
        [*command, "--workers", "2", str(records)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        os.kill(int(child_pids(process.pid)[0]), 9)
        _, stderr = process.communicate(timeout=60)
    finally:
        process.kill()  # whatever happened above: no process left behind
    assert process.returncode == 2
    assert stderr.decode() == (
        "error: a worker process ended before its chunk was done (killed, or out of memory?)\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_a_terminated_backtest_leaves_no_worker_behind(tmp_path: Path) -> None:
    """SIGTERM to the backtest (a `kill`, a cancelled CI job): it exits 143 and its
    workers end too (left behind, they waited for work forever)."""
    import signal

    records = tmp_path / "records.jsonl"
    BENCH.generate(records, 200_000)
    command = [sys.executable, "-m", "engine", "backtest", "--pack", "sentinel"]
    process = subprocess.Popen(
        [*command, "--workers", "2", str(records)], stdout=subprocess.DEVNULL
    )
    try:
        workers = child_pids(process.pid, at_least=2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        process.kill()
    assert workers and not still_running(workers, timeout=30)


def test_scheduler_needs_the_dask_executor() -> None:
    records = REPO / "examples" / "sentinel" / "records.jsonl"
    result = run_cli("backtest", "--pack", "sentinel", "--scheduler", "tcp://x:1", str(records))
    assert result.exit_code == 2 and "--scheduler needs --executor dask" in result.output


@pytest.mark.slow
def test_benchmark_at_volume_reports_the_built_flips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert BENCH.main(["--records", "30000", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "4,200 reasons of 301-500 chars" in out
    assert out.count("pass->fail 4,200 (as built)") == 2


@pytest.mark.slow  # CI installs pyarrow for the slow tests only
def test_parquet_records_give_the_jsonl_report(
    generated: tuple[Path, Path, int], tmp_path: Path
) -> None:
    parquet = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
    import pyarrow

    records, strict, _ = generated
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    table = pyarrow.Table.from_pylist(rows)
    groups = tmp_path / "groups.parquet"
    parquet.write_table(table, groups, row_group_size=300)
    whole = tmp_path / "whole.parquet"  # one row group: cut into chunks all the same
    parquet.write_table(table, whole)
    assert parquet.ParquetFile(whole).num_row_groups == 1
    args = ["backtest", "--pack", str(strict), "--baseline", "sentinel", "--format", "json"]
    from_jsonl = json.loads(run_cli(*args, str(records)).stdout)
    reports = [json.loads(run_cli(*args, "--workers", "2", str(groups)).stdout)]
    reports += [
        backtest(
            str(strict),
            [str(target)],
            baseline="sentinel",
            executor=local_executor(2),
            chunk_rows=rows_per_chunk,
        ).to_json()
        for target in (groups, whole)
        for rows_per_chunk in (1, 128, 4096)
    ]
    for report in (from_jsonl, *reports):
        for examples in report["examples"].values():
            for example in examples:
                example["where"] = example["where"].rsplit(":", 1)[1]
    assert all(report == from_jsonl for report in reports)
    damaged = tmp_path / "damaged.parquet"
    data = whole.read_bytes()
    damaged.write_bytes(data[:8] + b"\xff" * (len(data) // 2) + data[8 + len(data) // 2 :])
    result = run_cli(*args, str(damaged))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {damaged}: not a readable Parquet file (")


@pytest.mark.heavy
def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess

    records = REPO / "examples" / "sentinel" / "records.jsonl"
    command = [sys.executable, "-m", "engine", "backtest", "--pack", "sentinel", str(records)]
    piped = subprocess.run(command, capture_output=True, text=True, check=True)
    assert piped.stderr == ""
    leader, follower = pty.openpty()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower) as process:
        os.close(follower)
        assert process.stdout is not None
        out = process.stdout.read()
        process.wait()
    seen = os.read(leader, 4096).decode()
    os.close(leader)
    assert b"records  2" in out
    assert "[" + "#" * 30 + "] 100%" in seen


def test_places_count_lines_per_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"block": "VERDICT", "text": "x"}\n{oops\n')
    result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(bad), str(bad))
    report = json.loads(result.stdout)
    assert [e["where"] for e in report["invalid_examples"]] == [f"{bad}:2", f"{bad}:2"]


def test_packs_that_evaluate_alike_share_each_records_verdict(
    generated: tuple[Path, Path, int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to triggers only (VERDICT repaired twice): each record is evaluated once,
    decided under both packs; a contract change (REASON max 300) evaluates it under each,
    its payload read once (the change is a block rule, applied after reading)."""
    from engine.backtest import loaded_pack, tally_lines
    from engine.contracts.kinds.sentinel.parser import SentinelParser
    from engine.pack.compiled import Pack

    records, strict, long_reasons = generated
    copy = _sentinel_copy(
        tmp_path / "sentinel",
        VERDICT_ROW,
        VERDICT_ROW.replace("max_attempts: 1", "max_attempts: 2"),
    )
    calls = []
    evaluate = Pack.evaluate_prepared
    monkeypatch.setattr(
        Pack, "evaluate_prepared", lambda self, *a, **k: calls.append(1) or evaluate(self, *a, **k)
    )
    lines = records.read_bytes().splitlines()
    shared = tally_lines([loaded_pack(str(copy)), loaded_pack("sentinel")], lines)
    assert len(calls) == shared.records == len(lines)
    assert shared.flips == {} and shared.packs[0].status == shared.packs[1].status
    calls.clear()
    reads = []
    read = SentinelParser.read
    monkeypatch.setattr(SentinelParser, "read", lambda *a: reads.append(1) or read(*a))
    apart = tally_lines([loaded_pack(str(strict)), loaded_pack("sentinel")], lines)
    assert len(calls) == 2 * apart.records
    assert len(reads) == apart.records
    assert apart.flips["pass->fail"] == long_reasons


@pytest.mark.parametrize("output_format", ["text", "json", "md", "junit", "html"])
def test_lone_surrogates_in_records_are_reported_not_crashed_on(
    tmp_path: Path, output_format: str
) -> None:
    """A record's text, id and vars may hold lone surrogates (JSON allows "\\ud800"); the
    report is written in every format, U+FFFD in their place (JSON examples)."""
    records = tmp_path / "surrogates.jsonl"
    records.write_text(
        '{"id": "r\\ud800", "block": "VERDICT", "nonce": "4F2C9A",'
        ' "vars": {"criterion": "\\ud800"}, "text": "\\ud800 no block"}\n',
        encoding="utf-8",
    )
    result = run_cli(
        "backtest",
        "--pack",
        "gap-review",
        "--baseline",
        "sentinel",
        "--format",
        output_format,
        str(records),
    )
    assert result.exit_code == 0, result.output
    assert "\ufffd" in result.stdout or output_format != "json"
    assert "internal error" not in result.output


def test_records_from_a_pipe_are_refused_before_reading(tmp_path: Path) -> None:
    """A backtest reads records in chunks by position: a FIFO (or /dev/fd/N of a process
    substitution) is named as not a regular file, without blocking on it."""
    fifo = tmp_path / "records.fifo"
    os.mkfifo(fifo)
    result = run_cli("backtest", "--pack", "sentinel", str(fifo))
    assert result.exit_code == 2
    assert f"{fifo}: not a regular file" in result.stderr


def test_junit_and_text_reports_neutralise_control_characters_of_outputs(tmp_path: Path) -> None:
    pack = tmp_path / "echo"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    pack_file = pack / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8").replace(
        "{check: max_len, field: REASON, max: 500, message: REASON exceeds 500 chars}",
        '{check: max_len, field: REASON, max: 10, message: "REASON exceeds {max}: {value}"}',
    )
    pack_file.write_text(text, encoding="utf-8")
    block = (
        "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n"
        'REASON="ok \x1b[31m \x0c done"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>'
    )
    record = {"block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
    records = tmp_path / "control.jsonl"
    records.write_text(json.dumps({**record, "text": block}) + "\n")
    result = run_cli(
        "backtest", "--pack", str(pack), "--baseline", "sentinel", "--format", "junit", str(records)
    )
    failure = ET.fromstring(result.stdout).find(".//failure")  # well-formed XML
    assert failure is not None and failure.text is not None
    assert "REASON exceeds 10: ok \ufffd[31m \ufffd done" in failure.text
    text = run_cli("backtest", "--pack", str(pack), "--baseline", "sentinel", str(records))
    assert "REASON exceeds 10: ok \\x1b[31m \\x0c done" in text.stdout  # no escape reaches
    assert "\x1b" not in text.stdout  # the terminal


def one_record(tmp_path: Path) -> Path:
    """A records file of one record (what it holds does not matter to the test)."""
    records = tmp_path / "r.jsonl"
    records.write_text('{"block": "VERDICT", "text": "x"}\n')
    return records


@pytest.mark.parametrize("output", ["missing-folder/report.txt", "."])
def test_an_output_that_cannot_be_written_is_a_usage_error_before_the_work(
    tmp_path: Path, output: str
) -> None:
    """Exit 1 means "more flips than --max-flips": a bad -o must not look like it."""
    records = one_record(tmp_path)
    result = run_cli(
        "backtest", "--pack", "sentinel", "--max-flips", "0", str(records), "-o", output
    )
    assert result.exit_code == 2
    assert "Invalid value for '-o' / '--output'" in result.stderr


@pytest.mark.heavy
def test_a_full_disk_is_an_error_not_an_internal_error(tmp_path: Path) -> None:
    records = one_record(tmp_path)
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "engine", "backtest", "--pack", "sentinel", str(records)],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2
    assert done.stderr.decode() == (
        "error: cannot read or write (No space left on device); the output may be incomplete\n"
    )


@pytest.mark.parametrize(
    "address", ["garbage", "", "tcp://127.0.0.1:notaport", "tls://127.0.0.1:1", "tcp://h:70000"]
)
def test_a_scheduler_address_that_is_not_tcp_host_port_is_a_usage_error(
    tmp_path: Path, address: str
) -> None:
    records = one_record(tmp_path)
    result = run_cli(
        "backtest", "--pack", "sentinel", "--executor", "dask", "--scheduler", address, str(records)
    )
    assert result.exit_code == 2
    assert f"{address!r} is not a scheduler address: give tcp://HOST:PORT" in result.stderr


@pytest.mark.slow
def test_parquet_values_json_cannot_hold_are_invalid_records(tmp_path: Path) -> None:
    """A binary text, a date in the context, a list for vars: each row is an invalid record
    naming the column, not an internal error."""
    import datetime

    arrow = pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    parquet = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed")
    base = {"block": ["VERDICT"], "nonce": ["4F2C9A"], "vars": [{"criterion": "AC1"}]}
    tables = {
        "binary": {**base, "text": [b"x"]},
        "date": {**base, "text": ["x"], "context": [{"day": datetime.date(2020, 1, 1)}]},
        "list": {**base, "vars": [[1, 2]], "text": ["x"]},
    }
    errors = {}
    for name, columns in tables.items():
        path = tmp_path / f"{name}.parquet"
        parquet.write_table(arrow.table(columns), path)
        result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(path))
        report = json.loads(result.stdout)
        assert result.exit_code == 0 and report["invalid"] == 1
        errors[name] = report["invalid_examples"][0]["error"]
    assert errors == {
        "binary": "column 'text' holds a bytes value; records hold strings, whole numbers and "
        "objects (vars, context)",
        "date": "column 'context'['day'] holds a date value; records hold strings, whole "
        "numbers and objects (vars, context)",
        "list": "'vars' must be an object of strings",
    }


@pytest.mark.heavy
def test_backtest_reads_a_session_in_a_ledger(tmp_path: Path, ledger_url: str) -> None:
    """`--ledger URL --session NAME`: the kept outputs of a session in a ledger are the
    records, as those of the same runs in a session folder are."""
    folder = tmp_path / "folder-session"
    for nonce in ("4F2C9B", "4F2C9C"):
        _run_fake(folder, nonce, "--keep-outputs")
        _run_fake(Path("nightly"), nonce, "--keep-outputs", "--ledger", ledger_url)
    args = ("backtest", "--pack", "sentinel", "--baseline", "builtin:sentinel")
    from_folder = run_cli(*args, "--format", "json", str(folder))
    from_ledger = run_cli(*args, "--format", "json", "--ledger", ledger_url, "--session", "nightly")
    assert from_folder.exit_code == from_ledger.exit_code == 0, from_ledger.output
    report = json.loads(from_ledger.stdout)
    assert report == json.loads(from_folder.stdout.replace(str(folder), "nightly"))
    assert report["total"] == 4
    missing = run_cli(*args, "--ledger", ledger_url, "--session", "absent")
    assert missing.exit_code == 2 and "kept no outputs" in missing.stderr
    assert "s3cr3t" not in missing.stderr
    unnamed = run_cli(*args, "--session", "nightly")
    assert unnamed.exit_code == 2 and "give --ledger URL" in unnamed.stderr
