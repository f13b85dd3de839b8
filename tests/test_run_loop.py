"""`rules run` around real processes (small fake models) and `rules log` views."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from sentinel_cases import VERDICT_ARGS
from syrupy.assertion import SnapshotAssertion

import engine
from conftest import FIXTURES, REPO, child_pids, run_cli, run_script, script, still_running
from engine.ledger.store import SessionLedger, locate
from engine.session.command import run_with_command
from engine.session.run import RunRequest
from engine.session.session_ref import SessionRef

MODELS = FIXTURES / "models"
PY = sys.executable
VERDICT = (
    *VERDICT_ARGS,
    "--prompt",
    str(MODELS / "prompt.txt"),
)

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when slow


def stamps(text: str) -> str:
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<TS>", text)


@pytest.mark.heavy
def test_readme_run_then_log(tmp_path: Path) -> None:
    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--",
        PY,
        str(REPO / "examples" / "fake_model.py"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "criterion_id": "AC1",
        "answer": "YES",
        "reason": "All acceptance criteria are satisfied",
    }
    assert done.stderr.decode().splitlines() == [
        "rules run: attempt 1: fail PARSE_ERROR (line 2: ANSWER must be unquoted) -> REPAIR",
        "rules run: attempt 2: pass -> PROCEED",
    ]
    log = run_script(script("rules"), "log", "--format", "json", cwd=tmp_path)
    rows = json.loads(log.stdout)
    assert [(r["attempt"], r["action"]) for r in rows] == [(1, "REPAIR"), (2, "PROCEED")]
    assert rows[0]["prompt_sha256"] is not None


@pytest.mark.heavy
def test_fails_twice_then_succeeds(tmp_path: Path, snapshot: SnapshotAssertion) -> None:
    session = tmp_path / "s"
    done = run_script(
        script("rules"),
        "run",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--var",
        "known_gaps=GAP-FLOW-001",
        "--var",
        "round=2",
        "--session",
        str(session),
        "--",
        PY,
        str(MODELS / "fail_twice.py"),
        str(tmp_path / "counter"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ids"]["gap"] == ["GAP-FLOW-001"]
    assert done.stderr.decode().count("-> RETRY") == 2
    log = run_cli("log", "--session", str(session))
    assert log.exit_code == 0
    assert stamps(log.stdout) == snapshot


@pytest.mark.heavy
def test_always_failing_model_ends_with_the_after_failure_action(tmp_path: Path) -> None:
    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--session",
        str(tmp_path / "s"),
        "--",
        PY,
        str(MODELS / "always_fail.py"),
    )
    assert done.returncode == 1
    assert done.stdout == b""
    *attempts, review = done.stderr.decode().splitlines()
    assert attempts[-1].endswith("-> NEEDS_HUMAN")
    assert review.startswith("rules run: review 1 is open")
    reflect = run_script(
        script("rules"),
        "run",
        "--pack",
        "sentinel",
        "--block",
        "REFLECT",
        "--nonce",
        "4F2C9A",
        "--prompt",
        str(MODELS / "prompt.txt"),
        "--session",
        str(tmp_path / "r"),
        "--",
        PY,
        str(MODELS / "always_fail.py"),
    )
    assert reflect.returncode == 0  # seed 002: the cycle goes on with NOP and a warning
    assert json.loads(reflect.stdout) == {"action": "NOP"}
    assert "warning: DEGRADE" in reflect.stderr.decode().splitlines()[-1]


@pytest.mark.slow
def test_hanging_model_times_out(tmp_path: Path) -> None:
    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--timeout",
        "1",
        "--session",
        str(tmp_path / "s"),
        "--",
        PY,
        str(MODELS / "hang.py"),
        timeout=60,
    )
    assert done.returncode == 1
    assert (
        "MODEL_TIMEOUT (model command timed out after 1 s) -> NEEDS_HUMAN" in done.stderr.decode()
    )


@pytest.mark.folder_ledger
def test_crash_is_an_execution_failure_and_stderr_never_reaches_a_prompt(tmp_path: Path) -> None:
    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--session",
        str(tmp_path / "s"),
        "--",
        PY,
        str(MODELS / "crash.py"),
    )
    assert done.returncode == 1
    assert "EXECUTION_FAILED (model command exited with status 1)" in done.stderr.decode()
    # the operator sees the tail of the command's stderr; the ledger keeps it in its own
    # column, never as the attempt's error (which a prompt may quote)
    assert done.stderr.decode().endswith(
        "  RuntimeError: SECRET-STDERR-CONTENT: model backend unavailable\n"
        "rules run: review 1 is open: resolve it with `rules review show 1` (same --session "
        "and --ledger)\n"
    )
    with SessionLedger(locate(tmp_path / "s"), read_only=True) as ledger:
        rows = ledger.attempts()
    assert [(r["failure_type"], r["action"]) for r in rows] == [("EXECUTION_FAILED", "NEEDS_HUMAN")]
    assert rows[0]["stderr"].endswith(
        "RuntimeError: SECRET-STDERR-CONTENT: model backend unavailable"
    )
    assert "SECRET" not in json.dumps({k: v for k, v in rows[0].items() if k != "stderr"})


@pytest.mark.heavy
def test_a_pack_may_retry_execution_failures_with_the_same_prompt(tmp_path: Path) -> None:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    pack_file = copy / "pack.yaml"
    text = pack_file.read_text()
    marker = "  VERDICT:\n    on: [PARSE_ERROR, NONCE_MISMATCH, EMPTY_OUTPUT, NOT_TEXT]\n"
    assert marker in text
    text = text.replace(
        marker,
        "  VERDICT:\n    on: [PARSE_ERROR, NONCE_MISMATCH, EMPTY_OUTPUT, NOT_TEXT,"
        " EXECUTION_FAILED]\n",
    )
    retried = "\nfailure_types:\n  EXECUTION_FAILED: {severity: CRITICAL, retriable: true}\n"
    pack_file.write_text(text)
    assert run_cli("check", str(copy), "--format", "json").exit_code == 1  # not retriable
    pack_file.write_text(text + retried)
    assert run_cli("check", str(copy)).exit_code == 0
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Judge AC1 and answer with a VERDICT block.\n")
    pack = engine.load_pack(copy)
    result = run_with_command(
        pack,
        RunRequest(
            "VERDICT",
            prompt.read_text(),
            nonce="4F2C9A",
            vars={"criterion": "AC1"},
            session=SessionRef(tmp_path / "s"),
        ),
        [PY, str(MODELS / "crash_once.py"), str(tmp_path / "state")],
    )
    assert result.decision.action == "PROCEED"
    second = (tmp_path / "second_prompt.txt").read_text()
    assert second == prompt.read_text()
    assert "SECRET" not in second


@pytest.mark.folder_ledger
def test_failure_log_jsonl(tmp_path: Path) -> None:
    session = tmp_path / "s"
    run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--session",
        str(session),
        "--",
        PY,
        str(MODELS / "always_fail.py"),
    )
    result = run_cli("log", "--session", str(session), "--format", "jsonl", "--view", "failures")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [
        (x["gate_result"]["action"], x["gate_result"]["retry"], x["reprompt_generated"])
        for x in lines
    ] == [("REPAIR", 0, True), ("NEEDS_HUMAN", 1, False)]
    assert lines[0]["gate_result"]["errors"] == ["expected exactly 1 <<<VERDICT: block, found 0"]
    missing = run_cli("log", "--session", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2


# ---------------------------------------------------------------- hostile model commands


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers: read its state
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.slow
def test_a_hanging_model_and_its_children_are_ended(tmp_path: Path) -> None:
    import time

    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--timeout",
        "1",
        "--session",
        str(tmp_path / "s"),
        "--",
        "sh",
        "-c",
        f"sleep 300 & echo $! > {pidfile}; wait",
        timeout=60,
    )
    assert time.monotonic() - start < 15
    assert done.returncode == 1
    assert "model command timed out after 1 s" in done.stderr.decode()
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


@pytest.mark.slow
def test_endless_stdout_is_capped_and_stderr_is_drained(tmp_path: Path) -> None:
    import resource

    done = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--max-output-bytes",
        "1000000",
        "--session",
        str(tmp_path / "s"),
        "--",
        "sh",
        "-c",
        "head -c 1073741824 /dev/zero",
        timeout=120,
    )
    assert done.returncode == 1
    assert "model command printed more than 1000000 bytes on stdout" in done.stderr.decode()
    noisy = run_script(
        script("rules"),
        "run",
        *VERDICT,
        "--session",
        str(tmp_path / "t"),
        "--",
        "sh",
        "-c",
        f"head -c 209715200 /dev/zero >&2; cat {REPO / 'examples' / 'sentinel' / 'verdict.txt'}",
        timeout=120,
    )
    assert noisy.returncode == 0, noisy.stderr[-2000:]
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1024 * 1024  # < 1 GiB


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize(("signal_name", "status"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_an_interrupted_run_ends_its_model(tmp_path: Path, signal_name: str, status: int) -> None:
    """`rules run` stopped while the model runs (a `kill`, Ctrl-C: the model is in a
    session of its own, so the terminal's SIGINT does not reach it): the model's process
    group ends with it instead of running on, the status says which signal (not 1, a final
    failure), and the attempt in progress is not recorded."""
    import signal
    import subprocess
    import time

    model = tmp_path / "slow_model.py"
    model.write_text("import time\ntime.sleep(300)\n", encoding="utf-8")
    command = [PY, "-m", "engine", "run", *VERDICT, "--session", str(tmp_path / "s")]
    process = subprocess.Popen(
        [*command, "--", PY, str(model)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        [model_pid] = child_pids(process.pid)
        time.sleep(0.5)  # the run is waiting for the model now
        process.send_signal(getattr(signal, signal_name))
        assert process.wait(timeout=30) == status
    finally:
        process.kill()
    assert not still_running([model_pid], timeout=10)
    ledger = SessionLedger(locate(tmp_path / "s"))
    assert ledger.attempts() == []
    ledger.close()
