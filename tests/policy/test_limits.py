"""A pack's own limits (`limits:`): the output cap and the model timeout, with the
command-line options winning over them and the engine's defaults without either."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli, run_script, script

EXAMPLE = REPO / "examples" / "sentinel" / "verdict.txt"  # 162 bytes
VERDICT = ["--pack", "", "--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1"]


def with_limits(pack_file: Path, limits: str) -> None:
    """The pack's own `limits:` (the sentinel pack's prompt budget) with ``limits`` (a flow
    mapping) beside it."""
    text = pack_file.read_text(encoding="utf-8")
    limited = text.replace("\nlimits: {", "\nlimits: {" + limits.strip()[1:-1] + ", ", 1)
    assert limited != text
    pack_file.write_text(limited, encoding="utf-8")


def limited_pack(tmp_path: Path, limits: str) -> list[str]:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    with_limits(copy / "pack.yaml", limits)
    assert run_cli("check", str(copy)).exit_code == 0
    return [str(copy) if part == "" else part for part in VERDICT]


def test_the_packs_output_cap_holds_unless_the_command_gives_one(tmp_path: Path) -> None:
    options = limited_pack(tmp_path, "{max_output_bytes: 100}")
    size = EXAMPLE.stat().st_size
    assert size > 100
    parsed = run_cli("parse", *options, "--format", "json", str(EXAMPLE))
    assert parsed.exit_code == 1 and '"OUTPUT_TOO_LARGE"' in parsed.stdout
    evaluated = run_cli("eval", *options, str(EXAMPLE))
    assert evaluated.exit_code == 1 and "OUTPUT_TOO_LARGE" in evaluated.stdout
    assert "larger than 100 bytes" in evaluated.stdout
    wider = ("--max-output-bytes", str(size))
    assert run_cli("parse", *options, *wider, str(EXAMPLE)).exit_code == 0
    assert run_cli("eval", *options, *wider, str(EXAMPLE)).exit_code == 0
    shipped = [part if part else "sentinel" for part in VERDICT]
    assert run_cli("eval", *shipped, str(EXAMPLE)).exit_code == 0  # the default: 64 MiB


@pytest.mark.heavy
def test_the_packs_model_timeout_ends_a_hanging_model(tmp_path: Path) -> None:
    options = limited_pack(tmp_path, "{model_timeout: 1}")
    started = time.monotonic()
    done = run_script(
        script("rules"),
        "run",
        *options,
        "--prompt",
        str(FIXTURES / "models" / "prompt.txt"),
        "--session",
        str(tmp_path / "s"),
        "--",
        sys.executable,
        str(FIXTURES / "models" / "hang.py"),
        timeout=60,
    )
    assert time.monotonic() - started < 20  # two attempts of 1 s, not 600 s
    assert done.returncode == 1
    assert b"MODEL_TIMEOUT" in done.stderr  # classified (model_calls defaults)


def test_limits_out_of_range_are_findings(tmp_path: Path) -> None:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    with_limits(copy / "pack.yaml", "{max_output_bytes: 0, model_timeout: -1}")
    checked = run_cli("check", str(copy))
    assert checked.exit_code == 1
    assert checked.output.count("limits.") >= 2, checked.output
