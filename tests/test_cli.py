"""The command line through CliRunner and through real subprocesses of the installed scripts."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import REPO, copy_fixture, run_cli, run_script, script
from engine.format.schema import rulepack_schema_text
from engine.pack.sections import rulepack_model


def test_check_without_arguments_checks_rules_in_the_cwd(tmp_path: Path) -> None:
    shutil.copytree(REPO / "rules", Path.cwd() / "rules")
    result = run_cli("check")
    assert result.exit_code == 0
    assert "checked: 0 errors" in result.output


def test_check_without_rules_folder_is_a_usage_error() -> None:
    result = run_cli("check")
    assert result.exit_code == 2
    assert "no packs to check: with no pack named, rules reads ./rules/" in result.stderr


def test_exit_codes(tmp_path: Path) -> None:
    copy_fixture("many_findings", tmp_path)
    assert run_cli("check", "builtin:core").exit_code == 0
    assert run_cli("check", str(tmp_path / "many_findings")).exit_code == 1
    assert run_cli("check", "builtin:nope").exit_code == 2
    assert run_cli("check", "--format", "xml").exit_code == 2


def test_github_format_is_chosen_in_github_actions(tmp_path: Path) -> None:
    copy_fixture("many_findings", tmp_path)
    result = run_cli("check", str(tmp_path / "many_findings"), env={"GITHUB_ACTIONS": "true"})
    assert result.output.startswith("::error file=")


def test_schema_command_prints_the_checked_in_schema() -> None:
    result = run_cli("schema")
    assert result.exit_code == 0
    assert json.loads(result.output)["title"].startswith("Rulepack")
    assert result.output == rulepack_schema_text(rulepack_model())


def test_checked_in_schema_is_fresh() -> None:
    checked_in = (REPO / "contracts" / "rulepack.schema.json").read_text(encoding="utf-8")
    assert checked_in == rulepack_schema_text(rulepack_model()), (
        "contracts/rulepack.schema.json is stale: run `rules schema > "
        "contracts/rulepack.schema.json`"
    )


def test_help_has_examples() -> None:
    for args in (["--help"], ["check", "--help"], ["schema", "--help"]):
        result = run_cli(*args)
        assert result.exit_code == 0
    assert "Examples:" in run_cli("check", "--help").output


@pytest.mark.heavy
def test_installed_scripts_run_as_subprocesses(tmp_path: Path) -> None:
    copy_fixture("many_findings", tmp_path)
    clean = run_script(script("rules-check"), "builtin:core", cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    dirty = run_script(script("rules-check"), "many_findings", "--format", "json", cwd=tmp_path)
    assert dirty.returncode == 1
    assert json.loads(dirty.stdout)["errors"] == 6
    module = run_script(sys.executable, "-m", "engine", "check", "many_findings", cwd=tmp_path)
    assert module.returncode == 1
    assert b"many_findings/pack.yaml:21:5: [error] unknown key 'retries'" in module.stdout
    missing = run_script(script("rules"), "check", "nowhere", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith(b"error: nowhere:")
    assert b"Traceback" not in missing.stderr


def test_both_scripts_name_a_full_disk() -> None:
    """`rules` and `rules-check` share one runner: a refused write is an error, exit 2."""
    import os
    import subprocess

    import pytest

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    for command in ([script("rules"), "check", "rules/"], [script("rules-check"), "rules/"]):
        with open("/dev/full", "wb") as full:
            done = subprocess.run(
                command, cwd=REPO, stdout=full, stderr=subprocess.PIPE, timeout=60, check=False
            )
        assert done.returncode == 2, command
        assert done.stderr.decode() == (
            "error: cannot read or write (No space left on device); the output may be incomplete\n"
        )
