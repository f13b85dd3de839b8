"""`rules init`: a scaffolded pack of each kind passes `rules check` and `rules test` as
created, through the real CLI, and its passing example proceeds through `rules eval`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.mark.parametrize("kind", ["sentinel", "markdown", "json", "tool_call"])
def test_a_new_pack_checks_tests_and_proceeds(kind: str, tmp_path: Path) -> None:
    created = run_cli("init", "my-pack", "--kind", kind, "--dir", str(tmp_path))
    assert created.exit_code == 0, created.output
    folder = tmp_path / "my-pack"
    assert run_cli("check", str(folder)).exit_code == 0
    tested = run_cli("test", str(folder), "--format", "json")
    assert tested.exit_code == 0, tested.output
    report = json.loads(tested.stdout)
    assert (report["total"], report["passed"]) == (2, 2)
    first_line = (folder / "pack.yaml").read_text().splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema=")
    assert (folder / first_line.split("=", 1)[1]).resolve().name == "rulepack.schema.json"
    assert (folder / first_line.split("=", 1)[1]).resolve().is_file()
    (good,) = [p for p in (folder / "tests" / "ANSWER").iterdir() if not p.name.endswith("yaml")]
    options = ["--nonce", "4F2C9A", "--var", "question=Q1"] if kind == "sentinel" else []
    evaluated = run_cli("eval", "--pack", str(folder), "--block", "ANSWER", *options, str(good))
    assert evaluated.exit_code == 0, evaluated.output
    assert "PROCEED" in evaluated.stdout


def test_init_refuses_to_overwrite_and_bad_names(tmp_path: Path) -> None:
    assert run_cli("init", "p", "--dir", str(tmp_path)).exit_code == 0
    before = (tmp_path / "p" / "pack.yaml").read_text()
    again = run_cli("init", "p", "--dir", str(tmp_path))
    assert again.exit_code == 2 and "already exists; nothing was written" in again.output
    assert (tmp_path / "p" / "pack.yaml").read_text() == before
    bad = run_cli("init", "../escape", "--dir", str(tmp_path))
    assert bad.exit_code == 2 and "a pack name starts with a letter" in bad.output
