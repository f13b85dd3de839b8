"""Runs, items and sessions: a finished run (PROCEED or a final action) ends its item's run,
the item's next output starts a new run at attempt 1 unless the caller continues it
(`--continue`, ``continue_run=True``); `rules log` shows runs apart. And a model command's
stderr: its last lines shown to the operator and kept with the attempt (bounded, secrets
scrubbed), never put in a prompt."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import REPO, run_script, script
from engine.core.errors import UsageError
from engine.ledger import schema as ledger_schema
from engine.ledger.attempts import Attempt, Attempts, ItemAttempt
from engine.ledger.connection import open_ledger
from engine.session.command import STDERR_BYTES, STDERR_LINES

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when asked

BIN = Path(sys.executable).parent
BAD = (
    '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION="YES"\nREASON="it holds"\n'
    "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n"
)
ANSWER = ("--pack", "./my-pack", "--block", "ANSWER", "--nonce", "4F2C9A", "--var", "question=Q1")
# answers badly first, then well once asked to repair (as the README's stand-in)
REPAIRED = (
    "if grep -q 'broke its contract'; then cat my-pack/tests/ANSWER/good.txt; else cat out.txt; fi"
)

REVIEW_OPEN = (
    "rules run: review 1 is open: resolve it with `rules review show 1` (same --session and "
    "--ledger)"
)  # the NEEDS_HUMAN decision opened a review a person resolves


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with `rules init my-pack` done and the README's bad output in out.txt."""
    done = run_script(script("rules"), "init", "my-pack", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (tmp_path / "out.txt").write_text(BAD)
    return tmp_path


def rules(folder: Path, *args: str) -> tuple[int, str, list[str]]:
    done = run_script(script("rules"), *args, cwd=folder)
    return done.returncode, done.stdout.decode(), done.stderr.decode().splitlines()


def logged(folder: Path, *args: str) -> list[dict[str, Any]]:
    code, out, err = rules(folder, "log", "--format", "json", *args)
    assert code == 0, err
    rows: list[dict[str, Any]] = json.loads(out)
    return rows


# ------------------------------------------------------------------------------- runs


@pytest.mark.heavy
def test_the_readme_run_gives_the_same_result_twice(tmp_path: Path) -> None:
    """The README's tour, `rules run` included, run as written; then its `rules run` once
    more: a finished run does not swallow the next one (it was attempt 3: NEEDS_HUMAN)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = [
        line[2:]
        for line in readme.splitlines()
        if line.startswith("$ .venv/bin/rules ") or line.startswith("$ printf ")
    ]
    run = [c for c in commands if c.startswith(".venv/bin/rules run ")]
    assert len(run) == 1, run
    setup = [c for c in commands if c.startswith((".venv/bin/rules init", "printf"))]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

    def shell(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", command.replace(".venv/bin/", f"{BIN}/")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    for command in setup:
        assert shell(command).returncode == 0, command
    first, second = shell(run[0]), shell(run[0])
    assert first.returncode == second.returncode == 0, second.stderr
    assert (first.stdout, first.stderr) == (second.stdout, second.stderr)
    assert first.stderr.splitlines() == [
        "rules run: attempt 1: fail PARSE_ERROR (line 2: DECISION must be unquoted) -> REPAIR",
        "rules run: attempt 2: pass -> PROCEED",
    ]


@pytest.mark.heavy
def test_continue_goes_on_counting_the_ended_run(folder: Path) -> None:
    model = ("--", "sh", "-c", REPAIRED)
    assert rules(folder, "run", *ANSWER, *model)[0] == 0
    code, _, lines = rules(folder, "run", *ANSWER, "--continue", *model)
    assert code == 1
    assert lines == [
        "rules run: attempt 3: fail PARSE_ERROR (line 2: DECISION must be unquoted) -> NEEDS_HUMAN",
        REVIEW_OPEN,
    ]
    assert rules(folder, "run", *ANSWER, *model)[0] == 0  # that run ended too: a new one
    rows = logged(folder)
    assert [(r["run"], r["attempt"], r["action"]) for r in rows] == [
        (1, 1, "REPAIR"),
        (1, 2, "PROCEED"),
        (1, 3, "NEEDS_HUMAN"),
        (2, 1, "REPAIR"),
        (2, 2, "PROCEED"),
    ]


@pytest.mark.heavy
def test_log_shows_the_runs_of_an_item_apart(folder: Path) -> None:
    model = ("--", "sh", "-c", REPAIRED)
    for _ in range(2):
        assert rules(folder, "run", *ANSWER, *model)[0] == 0
    assert [(r["run"], r["attempt"]) for r in logged(folder)] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    code, shown, err = rules(folder, "log")
    assert code == 0, err
    summary = shown.split("### Validation Summary\n")[1].split("\n\n")[0].splitlines()
    assert summary[2:] == ["| ANSWER | SUCCESS | 2 | N/A (passed on retry) |"] * 2


@pytest.mark.heavy
def test_eval_starts_a_new_run_after_a_final_decision(folder: Path) -> None:
    session = ("--session", "s")
    good = str(folder / "my-pack" / "tests" / "ANSWER" / "good.txt")
    assert rules(folder, "eval", *ANSWER, *session, "out.txt")[0] == 3  # REPAIR
    assert rules(folder, "eval", *ANSWER, *session, good)[0] == 0  # PROCEED: the run ends
    assert rules(folder, "eval", *ANSWER, *session, "out.txt")[0] == 3  # a new run: REPAIR
    # the run is open: this output is its attempt 2 (its last), then --continue gives 3
    assert rules(folder, "eval", *ANSWER, *session, "out.txt")[0] == 1
    assert rules(folder, "eval", *ANSWER, *session, "--continue", "out.txt")[0] == 1
    rows = logged(folder, *session)
    assert [(r["run"], r["attempt"]) for r in rows] == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3)]


@pytest.mark.heavy
def test_continue_needs_an_item_to_continue(folder: Path) -> None:
    code, _, lines = rules(
        folder, "run", "--pack", "./my-pack", "--block", "ANSWER", "--var", "question=Q1",
        "--continue", "--", "sh", "-c", "cat out.txt",
    )  # fmt: skip
    assert code == 2
    assert "--continue continues an item's latest run: name the item with --item or" in lines[-1]
    code, _, lines = rules(folder, "eval", *ANSWER, "--continue", "out.txt")
    assert code == 2
    assert "--continue needs --session" in lines[-1]


def test_engine_run_starts_a_new_run_unless_asked_to_continue(folder: Path) -> None:
    good = (folder / "my-pack" / "tests" / "ANSWER" / "good.txt").read_text()
    pack = engine.load_pack(folder / "my-pack")

    def call(prompt: str) -> str:
        return good if "broke its contract" in prompt else BAD

    options: dict[str, Any] = {"nonce": "4F2C9A", "vars": {"question": "Q1"}}
    session = folder / "py-session"
    for _ in range(2):
        result = engine.run(pack, "ANSWER", call, session=session, **options)
        assert [a.decision.attempt for a in result.attempts] == [1, 2]
        assert result.decision.action == "PROCEED"
    continued = engine.run(pack, "ANSWER", call, session=session, continue_run=True, **options)
    assert [(a.decision.attempt, a.decision.action) for a in continued.attempts] == [
        (3, "NEEDS_HUMAN")
    ]
    with pytest.raises(UsageError, match="continue_run= takes True or False"):
        engine.run(pack, "ANSWER", call, session=session, continue_run="yes", **options)  # type: ignore[misc]
    with pytest.raises(UsageError, match=r"continue_run=\.\.\. continues an item's latest run"):
        engine.run(pack, "ANSWER", call, session=session, continue_run=True)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_ledger_of_schema_4_is_migrated_into_runs(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Attempts recorded before runs are run 1; an item whose latest attempt was final has
    ended its run (its next attempt is run 2, attempt 1); an open one goes on."""
    if backend == "sqlite":
        url = str(tmp_path / "ledger.db")
    else:
        url = request.getfixturevalue("postgres_server").create_database()
    row = Attempt("p", "fail", "REPAIR", "r", "x", False, "0" * 64, 1)
    with open_ledger(url, upto=4) as old:
        for item, final in (("ended", False), ("ended", True), ("open", False)):

            def insert(tx: Any, item: str = item, final: bool = final) -> None:
                tx.execute(
                    "INSERT INTO item_counters (session, block, item, last)"
                    " VALUES ('s', 'B', ?, 1) ON CONFLICT (session, block, item)"
                    " DO UPDATE SET last = item_counters.last + 1",
                    (item,),
                )
                number = tx.one(
                    "SELECT last FROM item_counters WHERE session = 's' AND block = 'B'"
                    " AND item = ?",
                    (item,),
                )[0]
                tx.execute(
                    "INSERT INTO attempts (session, ts, pack, block, item, attempt, status,"
                    " action, reason, rule, final, output_sha256, output_chars)"
                    " VALUES ('s', 't', 'p', 'B', ?, ?, 'fail', 'x', 'r', 'x', ?, 'h', 1)",
                    (item, number, int(final)),
                )

            old.write(insert)
    with open_ledger(url) as ledger:
        assert ledger.version() == ledger_schema.VERSION
        attempts = Attempts(ledger)
        assert attempts.record_attempt(ItemAttempt("s", "B", "ended", row)) == 1
        assert attempts.record_attempt(ItemAttempt("s", "B", "open", row)) == 2
        assert [(r["run"], r["attempt"]) for r in attempts.history("s", "B", "ended")] == [
            (1, 1),
            (1, 2),
            (2, 1),
        ]
        assert [(r["run"], r["attempt"]) for r in attempts.history("s", "B", "open")] == [
            (1, 1),
            (1, 2),
        ]


# ----------------------------------------------------------------------- model stderr


@pytest.mark.heavy
def test_a_failing_model_commands_stderr_is_shown_and_kept(folder: Path) -> None:
    """The table's row: the stderr of `sh -c 'echo "ERROR: OPENAI_API_KEY not set" >&2;
    exit 1'` was nowhere."""
    command = 'echo "ERROR: OPENAI_API_KEY not set" >&2; exit 1'
    code, _, lines = rules(folder, "run", *ANSWER, "--", "sh", "-c", command)
    assert code == 1
    assert lines == [
        "rules run: attempt 1: fail EXECUTION_FAILED (model command exited with status 1) "
        "-> NEEDS_HUMAN",
        "rules run: the model command's stderr (last line):",
        "  ERROR: OPENAI_API_KEY not set",
        REVIEW_OPEN,
    ]
    [row] = logged(folder)
    assert row["stderr"] == "ERROR: OPENAI_API_KEY not set"


@pytest.mark.heavy
def test_the_kept_stderr_is_bounded_and_scrubbed(folder: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    command = (
        "for i in $(seq 1 100); do echo \"line $i $(printf 'x%.0s' $(seq 1 300))\" >&2; done;"
        ' echo "the key was $OPENAI_API_KEY; the ledger postgresql://u:hunter22@db/x" >&2; exit 3'
    )
    env = {**os.environ, "OPENAI_API_KEY": secret}
    done = subprocess.run(
        [script("rules"), "run", *ANSWER, "--", "sh", "-c", command],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert secret not in done.stderr and "hunter22" not in done.stderr
    [row] = logged(folder)
    kept = row["stderr"]
    assert len(kept.encode()) <= STDERR_BYTES + len("[...]")
    assert len(kept.splitlines()) <= STDERR_LINES
    assert kept.endswith("the key was ***; the ledger postgresql://u:***@db/x")
    assert secret not in kept and "hunter22" not in kept
    assert "the key was ***" in done.stderr


@pytest.mark.heavy
def test_stderr_is_never_put_in_a_prompt(folder: Path) -> None:
    """A model that prints to stderr and breaks its contract: the repair prompt it gets
    carries the error and the output, not the stderr; the stderr is kept with the attempt
    (and not shown: the command did not fail)."""
    seen = folder / "prompts.txt"
    # keeps every prompt it gets; answers well once a prompt so far asked for a repair
    command = (
        f"cat >> {shlex.quote(str(seen))}; echo STDERR-NOTE-7 >&2;"
        f" {{ {REPAIRED}; }} < {shlex.quote(str(seen))}"
    )
    code, _, lines = rules(folder, "run", *ANSWER, "--", "sh", "-c", command)
    assert code == 0, lines
    assert all("STDERR-NOTE-7" not in line for line in lines)
    prompts = seen.read_text()
    assert "broke its contract" in prompts and "STDERR-NOTE-7" not in prompts
    assert [r["stderr"] for r in logged(folder)] == ["STDERR-NOTE-7"] * 2


def test_an_exception_of_engine_run_is_never_put_in_a_prompt(folder: Path) -> None:
    """A pack that retries execution failures: the exception's message is the attempt's
    error, and the next prompt is the same prompt again, without it."""
    pack_file = folder / "my-pack" / "pack.yaml"
    text = pack_file.read_text()
    text = text.replace(
        "triggers:\n",
        "failure_types:\n  EXECUTION_FAILED: {severity: CRITICAL, retriable: true, "
        "explain: The model call failed.}\n\ntriggers:\n",
    ).replace("NOT_TEXT]\n    max_attempts: 1", "NOT_TEXT, EXECUTION_FAILED]\n    max_attempts: 3")
    pack_file.write_text(text)
    good = (folder / "my-pack" / "tests" / "ANSWER" / "good.txt").read_text()
    prompts: list[str] = []

    def call(prompt: str) -> str:
        prompts.append(prompt)
        if len(prompts) == 1:
            raise RuntimeError("quota spent for key MESSAGE-MARK-9")
        return good if "broke its contract" in prompt else BAD

    result = engine.run(
        str(folder / "my-pack"),
        "ANSWER",
        call,
        session=folder / "s",
        nonce="4F2C9A",
        vars={"question": "Q1"},
    )
    assert [a.decision.action for a in result.attempts] == ["REPAIR", "REPAIR", "PROCEED"]
    assert result.attempts[0].verdict.error == (
        "model call raised RuntimeError: quota spent for key MESSAGE-MARK-9"
    )
    assert prompts[1] == prompts[0]  # an execution failure sends the same prompt again
    assert all("MESSAGE-MARK-9" not in p for p in prompts)
