"""End to end: the README's commands as written, and the wheel installed in a fresh venv.

These build and install, so they take a while; a nested run (the README's test command
started from here) skips them to avoid recursion.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
from installed import Installed, fresh_copy

from conftest import NESTED, REPO, SCRIPTS

pytestmark = [pytest.mark.slow]


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set up and run", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README needs a ```sh block under '## Set up and run'"
    commands = [
        line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")
    ]
    assert len(commands) == 2, commands
    return commands


def run_shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def test_readme_commands_work_as_written(tmp_path: Path) -> None:
    setup, tests = readme_commands()
    clone = fresh_copy(tmp_path / "clone")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}
    first = run_shell(setup, clone, env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    second = run_shell(tests, clone, {**env, NESTED: "1"})
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert re.search(r"\d+ passed", second.stdout)


SHIPPED = ("rules", "prompts", "contracts")


def shipped_files() -> set[str]:
    """The checkout's files a wheel must carry (under engine/_data/) and an sdist too."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *SHIPPED],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return {rel for rel in listed.split("\0") if rel and (REPO / rel).is_file()}


def test_wheel_installs_and_finds_builtin_packs(installed: Installed, tmp_path: Path) -> None:
    """`python -m build` as CI runs it: an sdist, then the wheel built from that sdist (so
    the sdist is complete), both carrying the packs, prompts and schemas; the wheel in a
    fresh venv checks and tests every builtin pack from an empty folder."""
    wheel, sdist = installed.wheel, installed.sdist
    expected = shipped_files()
    assert {"rules/sentinel/pack.yaml", "contracts/rulepack.schema.json"} <= expected
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    assert {f"engine/_data/{rel}" for rel in expected} <= in_wheel
    # and every file of the package, templates and data included, not only its modules
    engine_files = subprocess.run(
        ["git", "ls-files", "-z", "--", "engine"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    assert {rel for rel in engine_files.split("\0") if rel and (REPO / rel).is_file()} <= in_wheel
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert expected <= in_sdist
    venv = installed.venv
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}

    def run(program: Path, *args: str, cwd: Path = empty) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(program), *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    names = sorted(path.parent.name for path in (REPO / "rules").glob("*/pack.yaml"))
    assert "sentinel" in names
    for name in names:
        checked = run(venv / "bin" / "rules", "check", f"builtin:{name}")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "0 errors" in checked.stdout
        tested = run(venv / "bin" / "rules", "test", f"builtin:{name}")
        assert tested.returncode == 0, tested.stdout + tested.stderr
        # the same cases, with the same outcome, as from the checkout
        here = run(SCRIPTS / "rules", "test", str(REPO / "rules" / name))
        assert tested.stdout.splitlines()[-1] == here.stdout.splitlines()[-1], name
    result = run(venv / "bin" / "rules-check", "builtin:core", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "site-packages" in result.stdout
