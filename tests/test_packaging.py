"""End to end: the README's commands as written, and the wheel installed in a fresh venv.

These build and install, so they take a while; a nested run (the README's test command
started from here) skips them to avoid recursion.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import NESTED, REPO

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


def fresh_copy(dest: Path) -> Path:
    """The files a fresh clone would have (tracked or not ignored), nothing installed."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        source = REPO / rel
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return dest


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


def test_wheel_installs_and_finds_builtin_packs(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(wheels),
            str(fresh_copy(tmp_path / "src")),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    [wheel] = wheels.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:  # the report layer's HTML templates ship
        assert "engine/report/templates/session.html.j2" in archive.namelist()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}
    for name in ("core",):
        result = subprocess.run(
            [str(venv / "bin" / "rules"), "check", f"builtin:{name}"],
            cwd=empty,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "_data/rules" in result.stdout or "0 errors" in result.stdout
    result = subprocess.run(
        [str(venv / "bin" / "rules-check"), "builtin:core", "--format", "json"],
        cwd=empty,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "site-packages" in result.stdout
