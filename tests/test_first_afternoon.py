"""What a team meets in its first afternoon (issue 37): the caller's mistakes are named as
the caller's, at every front door, and the pack's own promises hold where docs say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import engine
from conftest import run_cli

BAD = (
    '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION="YES"\nREASON="it holds"\n'
    "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n"
)


@pytest.fixture
def my_pack(tmp_path: Path) -> Path:
    """The pack `rules init` makes: block ANSWER, param `question` matching ^Q[0-9]+$."""
    made = run_cli("init", "my-pack", "--dir", str(tmp_path))
    assert made.exit_code == 0, made.output
    return tmp_path / "my-pack"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out.txt"
    path.write_text(BAD, encoding="utf-8")
    return path


# ------------------------------------------------------------ a param that fails its pattern


@pytest.mark.parametrize("command", ["eval", "render"])
def test_a_param_failing_its_pattern_is_a_usage_error(
    my_pack: Path, out: Path, command: str
) -> None:
    result = run_cli(
        command, "--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "question=X1", str(out),
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "PARSE_ERROR" not in result.output and "REPAIR" not in result.output
    assert "question" in result.stderr and "'X1'" in result.stderr
    assert "^Q[0-9]+$" in result.stderr


def test_a_param_failing_its_pattern_is_a_usage_error_in_python(
    my_pack: Path, tmp_path: Path
) -> None:
    with pytest.raises(engine.UsageError, match="question"):
        engine.run(
            str(my_pack),
            "ANSWER",
            lambda prompt: BAD,
            nonce="4F2C9A",
            vars={"question": "X1"},
            session=tmp_path / "s",
        )
    assert not (tmp_path / "s").exists()


def test_a_param_failing_its_pattern_is_a_problem_naming_the_field(
    my_pack: Path, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    config = ServerSettings(packs=(str(my_pack),), sessions_dir=str(tmp_path / "sessions"))
    client = TestClient(create_app(config, load_pack_set(config.packs)))
    body = {"pack": "my-pack", "block": "ANSWER", "nonce": "4F2C9A", "output": BAD}
    response = client.post("/v1/evaluate", json={**body, "vars": {"question": "X1"}})
    assert 400 <= response.status_code < 500, response.text
    problem = json.loads(response.text)
    assert "vars.question" in json.dumps(problem)
    assert "^Q[0-9]+$" in problem["detail"]


# ------------------------------------------------------------ a misspelt param


def test_a_misspelt_param_is_named_as_the_block_parameter(my_pack: Path, out: Path) -> None:
    result = run_cli(
        "eval", "--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "qestion=Q1", str(out),
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "did you mean the block parameter 'question'?" in result.stderr, result.stderr
    with pytest.raises(engine.EngineError, match="did you mean the block parameter 'question'"):
        engine.load_pack(str(my_pack)).split_inputs("ANSWER", None, {"qestion": "Q1"})
