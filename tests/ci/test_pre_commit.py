"""The repository as a pre-commit hook repository (.pre-commit-hooks.yaml), tried with the
real `pre-commit` tool on a team's repository holding a pack, and the repository's own
.pre-commit-config.yaml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

PACK = """\
rulepack: demo
version: 1.0.0
extends: [builtin:core]
contracts:
  ANSWER:
    kind: text
    max_chars: 100
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout


def snapshot_of_this_checkout(dest: Path) -> Path:
    """A git repository whose one commit is this checkout as it is now (tracked files and
    untracked ones that are not ignored, with their uncommitted changes): pre-commit clones
    a hook repository at a commit, so uncommitted work is tested only once committed."""
    listed = git(REPO, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return dest


def team_repository(root: Path, pack_text: str) -> Path:
    root.mkdir()
    pack = root / "rules" / "demo"
    pack.mkdir(parents=True)
    (pack / "pack.yaml").write_text(pack_text, encoding="utf-8")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a pack")
    return root


def try_repo(hook_repo: Path, cwd: Path, hook: str, home: Path) -> subprocess.CompletedProcess[str]:
    # pre-commit builds the hook's virtualenv with pip, which reads this machine's pip
    # configuration (index, find-links) from the inherited environment and config files.
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}
    env["PRE_COMMIT_HOME"] = str(home)
    return subprocess.run(
        [str(PRE_COMMIT), "try-repo", str(hook_repo), hook, "--all-files", "--verbose"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_hooks_fail_on_a_finding_or_failing_case_and_pass_a_clean_pack(tmp_path: Path) -> None:
    hooks = snapshot_of_this_checkout(tmp_path / "hooks")
    home = tmp_path / "pre-commit-home"
    broken = PACK + '    pattern: "(unclosed"\n'
    bad = team_repository(tmp_path / "bad", broken)
    failed = try_repo(hooks, bad, "rules-check", home)
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "rules/demo/pack.yaml" in failed.stdout
    assert "invalid-pattern" in failed.stdout
    good = team_repository(tmp_path / "good", PACK)
    passed = try_repo(hooks, good, "rules-check", home)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "rules check" in passed.stdout and "Passed" in passed.stdout
    # rules-test, with the same hook environment: a case whose expectation fails, then holds
    case = "tests:\n  - {name: a short answer, block: ANSWER, input: hi, expect: {status: %s}}\n"
    wrong = team_repository(tmp_path / "wrong", PACK + case % "fail")
    failed = try_repo(hooks, wrong, "rules-test", home)
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-3000:]
    assert "FAIL demo: a short answer" in failed.stdout
    right = team_repository(tmp_path / "right", PACK + case % "pass")
    passed = try_repo(hooks, right, "rules-test", home)
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert "1 passed, 0 failed" in passed.stdout


def test_own_pre_commit_config_is_valid() -> None:
    configs = [REPO / ".pre-commit-config.yaml"]
    result = subprocess.run(
        [str(PRE_COMMIT), "validate-config", *map(str, configs)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = subprocess.run(
        [str(PRE_COMMIT), "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert manifest.returncode == 0, manifest.stdout + manifest.stderr
