"""`rules run` never mixes up the user and the model; the first prompt a pack declares is
sent when no prompt is given; no command waits silently on a terminal; caller mistakes in
the Python API are engine errors saying what to pass."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

import engine
from conftest import FIXTURES, REPO, run_cli, run_script, script

PY = sys.executable
PROMPT = str(FIXTURES / "models" / "prompt.txt")
VERDICT = ("--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")


def test_a_model_command_with_options_needs_the_double_dash(tmp_path: Path) -> None:
    session = tmp_path / "s"
    result = run_cli(
        "run", *VERDICT, "--prompt", PROMPT, "--session", str(session),
        "python", "model.py", "--model", "gpt-4o", "--timeout", "30",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "the model command `python model.py --model gpt-4o --timeout 30` has options" in (
        result.output
    )
    assert "rules run [OPTIONS] -- python model.py --model gpt-4o --timeout 30" in result.output
    assert not session.exists()
    unknown = run_cli("run", *VERDICT, "--no-such", "--", "true")
    assert unknown.exit_code == 2 and "no such option: --no-such" in unknown.output


def test_a_model_command_without_options_runs_without_the_double_dash(tmp_path: Path) -> None:
    done = run_script(
        script("rules"), "run", *VERDICT, "--var", "criterion=AC1", "--prompt", PROMPT,
        "--session", str(tmp_path / "s"), PY, str(REPO / "examples" / "fake_model.py"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_model_command_that_does_not_exist_is_a_usage_error(tmp_path: Path) -> None:
    session = tmp_path / "s"
    for command, message in [
        ("no-such-model-command", "model command 'no-such-model-command' not found on PATH"),
        (str(tmp_path / "nowhere.py"), "not found (no such file)"),
        (PROMPT, "is not executable"),
    ]:
        result = run_cli(
            "run", *VERDICT, "--prompt", PROMPT, "--session", str(session), "--", command
        )
        assert result.exit_code == 2, result.output
        assert message in result.output and "nothing was run" in result.output
    assert not session.exists()  # no attempt used up


@pytest.mark.heavy
def test_the_pack_s_first_prompt_is_sent_when_none_is_given(tmp_path: Path) -> None:
    assert run_script(script("rules"), "init", "p", cwd=tmp_path).returncode == 0
    pack = ("--pack", str(tmp_path / "p"), "--block", "ANSWER", "--nonce", "4F2C9A")
    shown = run_cli("prompt", *pack[:4], "--nonce", "4F2C9A", "--var", "question=Q1")
    assert shown.exit_code == 0
    assert "<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>" in shown.output  # the contract text, filled
    got = tmp_path / "got.txt"
    done = run_script(
        script("rules"), "run", *pack, "--var", "question=Q1", "--session", str(tmp_path / "s"),
        "--", "sh", "-c", f"cat > {got}; cat {tmp_path / 'p' / 'tests' / 'ANSWER' / 'good.txt'}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert got.read_text() == shown.output

    prompts: list[str] = []

    def call(prompt: str) -> str:
        prompts.append(prompt)
        return (tmp_path / "p" / "tests" / "ANSWER" / "good.txt").read_text()

    result = engine.run(
        tmp_path / "p", "ANSWER", call, session=tmp_path / "py", nonce="4F2C9A",
        vars={"question": "Q1"},
    )  # fmt: skip
    assert result.decision.action == "PROCEED"
    assert prompts == [shown.output]


def test_neither_a_declared_nor_a_given_prompt_is_a_usage_error(tmp_path: Path) -> None:
    pack = str(FIXTURES / "packs" / "json_text")
    given = ("--pack", pack, "--block", "task", "--session", str(tmp_path / "s"))
    result = run_cli("run", *given, "--", "true")
    assert result.exit_code == 2
    assert (
        "pack 'json-text' declares no first prompt for block 'task': pass --prompt FILE"
        in result.output
    )
    assert not (tmp_path / "s").exists()


def test_help_documents_the_signal_statuses() -> None:
    shown = " ".join(run_cli("run", "--help").output.split())
    assert "130 when interrupted (SIGINT, Ctrl-C) and 143 when terminated (SIGTERM)" in shown


@pytest.mark.parametrize(
    "command",
    [
        ("eval", *VERDICT),
        ("render", *VERDICT),
        ("parse", *VERDICT),
        ("parse", "--pack", "sentinel", "--jsonl", "-"),
        ("gate", "--pack", "quality-gate", "--stage", "PLAN", "-"),
    ],
    ids=lambda c: " ".join(c[:1] + c[-1:]),
)
def test_no_output_and_a_terminal_on_stdin_is_a_usage_error(command: tuple[str, ...]) -> None:
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [script("rules"), *command],
            stdin=terminal,
            capture_output=True,
            timeout=60,  # a silent wait would end here
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == 2, done.stderr
    assert b"stdin is a terminal; pass a FILE, or pipe the output in" in done.stderr


def test_python_api_mistakes_are_engine_errors_that_say_what_to_pass() -> None:
    pack = engine.load_pack("sentinel")
    verdict = pack.evaluate("VERDICT", "x", nonce="4F2C9A", vars={"criterion": "AC1"})
    cases = [
        (lambda: pack.decide(verdict, output="x", attempt=0), "attempt= takes a whole number"),
        (lambda: pack.decide("x", output="x"), "verdict= takes a Verdict"),  # type: ignore[arg-type]
        (lambda: pack.evaluate("VERDICT", 5), "text= takes the output text"),  # type: ignore[arg-type]
        (lambda: pack.evaluate("VERDICT", "x", vars={"a": 1}), "vars= takes a dict of text"),  # type: ignore[dict-item]
        (lambda: pack.evaluate("NOPE", "x"), "has no block 'NOPE' (blocks: PLAN"),
        (
            lambda: pack.render(verdict, "d", output="x"),  # type: ignore[arg-type]
            "decision= takes a Decision",
        ),
    ]
    for call, message in cases:
        with pytest.raises(engine.EngineError, match=message.replace("(", r"\(")):
            call()
