"""Files named on the command line are read no further than their limit (a sparse or
endless file, a device) and must be UTF-8 where text is expected: a clear error naming
the file, never an internal error or gigabytes read."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from engine.cli.gate import MAX_FILE_BYTES
from engine.cli.run import MAX_PROMPT_BYTES
from engine.format.yamldoc import MAX_YAML_BYTES

RUN = ("run", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)  # holes: no disk used
    return path


def _prompt_sources(tmp_path: Path) -> list[str]:
    sources = [str(_sparse(tmp_path / "big.txt", MAX_PROMPT_BYTES + 1))]
    return sources + (["/dev/zero"] if os.path.exists("/dev/zero") else [])


def test_a_prompt_over_its_limit_is_refused_unread(tmp_path: Path) -> None:
    for source in _prompt_sources(tmp_path):
        session = tmp_path / "session"
        result = run_cli(*RUN, "--session", str(session), "--prompt", source, "--", "true")
        assert result.exit_code == 2, source
        assert result.stderr.strip() == (
            f"error: {source}:1:1: file is over the {MAX_PROMPT_BYTES}-byte limit; it was "
            "not read further (--prompt)"
        )
        assert not session.exists()  # refused before anything was recorded


def test_a_prompt_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    prompt = tmp_path / "bin.txt"
    prompt.write_bytes(b"ok\n\xff\xfe")
    session = tmp_path / "session"
    result = run_cli(*RUN, "--session", str(session), "--prompt", str(prompt), "--", "cat")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: {prompt}:1:1: file is not valid UTF-8 (byte 3) (--prompt)"
    )
    assert not session.exists()


def test_a_context_over_its_limit_is_refused_unread(tmp_path: Path) -> None:
    """The context limit held for regular files only (their size); a device or FIFO was
    read whole."""
    sources = [str(_sparse(tmp_path / "big.yaml", MAX_YAML_BYTES + 1))]
    sources += ["/dev/zero"] if os.path.exists("/dev/zero") else []
    for source in sources:
        result = run_cli(
            "eval", "--pack", "gap-review", "--block", "engineer", "--var", "round=1",
            "--context", source, os.devnull,
        )  # fmt: skip
        assert result.exit_code == 2, source
        message = result.stderr.strip()  # the file as pack files are shown (relative)
        assert message.startswith("error: ") and message.endswith(
            f"{Path(source).name}:1:1: file is over the {MAX_YAML_BYTES}-byte limit; it was "
            "not read further"
        )


@pytest.mark.skipif(sys.platform == "win32", reason="sparse files")
def test_a_gate_file_over_its_limit_is_the_gates_error_unread(tmp_path: Path) -> None:
    """As any output over the JSON limit, an error of the gate (the model gets it back),
    found after reading at most MAX_FILE_BYTES + 1 bytes of a 3 GB file."""
    big = _sparse(tmp_path / "big.txt", 3 * 1024**3)
    result = run_cli(
        "gate", "--pack", "quality-gate", "--stage", "TEST", "--format", "json", str(big)
    )
    assert result.exit_code == 3
    assert json.loads(result.stdout)["errors"][0] == (
        f"Invalid JSON: {big}: the output is over {MAX_FILE_BYTES} bytes, over the limit "
        "of 8388608 characters for JSON; it was not read further"
    )
