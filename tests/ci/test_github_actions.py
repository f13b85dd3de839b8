"""examples/ci/github-actions.yml: its own `rules` steps, run as GitHub Actions would run
them (bash -eo pipefail, the workflow's and the step's env) in a pull request of a team's
repository holding the shipped sentinel pack, so the example cannot rot. actionlint checks
the file itself in CI (.ci/run)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO

WORKFLOW = REPO / "examples" / "ci" / "github-actions.yml"
RULES_CALL = re.compile(r"(^|[\s;&|(])rules\s", re.M)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return loaded


def rules_steps() -> dict[str, dict[str, Any]]:
    """The steps whose script calls `rules`, by what they do."""
    [job] = workflow()["jobs"].values()
    steps = [step for step in job["steps"] if RULES_CALL.search(step.get("run", ""))]
    by_kind: dict[str, dict[str, Any]] = {}
    for step in steps:
        script = step["run"]
        if "rules backtest" in script:
            assert "--max-flips" in script
            by_kind["backtest"] = step
        elif "rules check" in script:
            assert "--format sarif" in script and "rules.sarif" in script
            by_kind["check"] = step
        elif "rules test" in script:
            assert "--format junit" in script
            by_kind["test"] = step
    assert set(by_kind) == {"check", "test", "backtest"}, [s.get("name") for s in steps]
    return by_kind


def pull_request(root: Path, edit: tuple[str, str]) -> tuple[Path, str]:
    """A repository whose main holds the shipped sentinel pack and logged outputs, checked
    out at a pull request that edits the pack; returns it and the base commit."""
    root.mkdir()
    shutil.copytree(REPO / "rules" / "sentinel", root / "rules" / "sentinel")
    (root / "logs").mkdir()
    shutil.copy2(REPO / "examples" / "sentinel" / "records.jsonl", root / "logs" / "week.jsonl")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "packs and logs")
    base = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "-b", "change")
    pack = root / "rules" / "sentinel" / "pack.yaml"
    old, new = edit
    text = pack.read_text(encoding="utf-8")
    assert old in text
    pack.write_text(text.replace(old, new, 1), encoding="utf-8")
    git(root, "commit", "-q", "-am", "the change")
    return root, base


def run_step(step: dict[str, Any], root: Path, base: str) -> subprocess.CompletedProcess[str]:
    """One step's script with the workflow's env, the step's env (its expressions given the
    pull request's values) and the runner's variables, the installed `rules` on PATH."""
    expressions = {"${{ github.event.pull_request.base.sha }}": base}
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}
    env.update({k: str(v) for k, v in workflow()["env"].items()})
    for key, value in step.get("env", {}).items():
        env[key] = expressions.get(value, value)
        assert "${{" not in env[key], f"no value for {value} in this test"
    runner = root.parent / "runner"
    runner.mkdir(exist_ok=True)
    env.update(
        CI="true",
        RUNNER_TEMP=str(runner),
        GITHUB_STEP_SUMMARY=str(runner / "summary.md"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    )
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.heavy
def test_the_workflow_passes_a_pull_request_that_changes_no_outcome(tmp_path: Path) -> None:
    steps = rules_steps()
    root, base = pull_request(
        tmp_path / "team",
        ("description: Sentinel-delimited blocks", "description: Our sentinel-delimited blocks"),
    )
    check = run_step(steps["check"], root, base)
    assert check.returncode == 0, check.stderr
    sarif = json.loads((root / "rules.sarif").read_text(encoding="utf-8"))
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"] == []
    tested = run_step(steps["test"], root, base)
    assert tested.returncode == 0, tested.stderr
    suites = ET.parse(root / "rules-test.xml").getroot()
    assert int(suites.get("tests", "0")) > 0 and suites.get("failures") == "0"
    backtest = run_step(steps["backtest"], root, base)
    assert backtest.returncode == 0, backtest.stdout + backtest.stderr
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "## Backtest of rules/sentinel" in summary
    assert "pass->fail" not in summary


@pytest.mark.heavy
def test_the_workflow_fails_a_pull_request_that_flips_logged_outputs(tmp_path: Path) -> None:
    steps = rules_steps()
    root, base = pull_request(
        tmp_path / "team",
        ("{check: max_len, field: REASON, max: 500", "{check: max_len, field: REASON, max: 10"),
    )
    backtest = run_step(steps["backtest"], root, base)
    assert backtest.returncode == 1, backtest.stdout + backtest.stderr
    summary = (tmp_path / "runner" / "summary.md").read_text(encoding="utf-8")
    assert "## Backtest of rules/sentinel" in summary
    assert "pass->fail" in summary


@pytest.mark.heavy
def test_a_finding_fails_the_check_step_and_is_in_the_sarif(tmp_path: Path) -> None:
    steps = rules_steps()
    root, base = pull_request(tmp_path / "team", ("max_payload_chars: 16000", "max_payload: 1"))
    check = run_step(steps["check"], root, base)
    assert check.returncode == 1, check.stderr
    sarif = json.loads((root / "rules.sarif").read_text(encoding="utf-8"))
    [result] = sarif["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("rules/sentinel/pack.yaml")
