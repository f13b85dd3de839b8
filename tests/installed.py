"""The engine as a user installs it: an sdist built from a fresh copy of the checkout, the
wheel built from that sdist, and the wheel installed in a fresh venv outside the checkout.

Built once per test run (``installed`` in conftest.py) for the slow tests that use the
engine as a wheel user does: test_packaging, the help examples and the first-afternoon
table walked from the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO


@dataclass(frozen=True)
class Installed:
    """Where the build put the wheel and the sdist, and the venv holding the wheel."""

    wheel: Path
    sdist: Path
    venv: Path

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        """The environment of a user of this venv: its bin first on PATH, nothing of the
        checkout's venv or of CI."""
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "GITHUB_ACTIONS")}
        for name in ("CI", "RULES_LEDGER", "PYTHONPATH"):
            env.pop(name, None)
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        return env


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


def build_and_install(folder: Path) -> Installed:
    """`python -m build` as CI runs it (the sdist, then the wheel from the sdist), and the
    wheel installed with its dependencies and the server, mcp, postgres and dask extras in
    a new venv under ``folder``."""
    dist = folder / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(fresh_copy(folder / "src"))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [wheel] = dist.glob("*.whl")
    [sdist] = dist.glob("*.tar.gz")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run(
        # with the extras of the commands a team runs first (`rules serve`, `rules mcp`, a
        # shared PostgreSQL ledger, backtests on a Dask cluster)
        [str(venv / "bin" / "pip"), "install", "-q", f"{wheel}[server,mcp,postgres,dask]"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return Installed(wheel, sdist, venv)


@dataclass(frozen=True)
class Ran:
    """What a `rules` command of the installed wheel did, read as click's Result is."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def wheel_cli(installed: Installed) -> Callable[..., Ran]:
    """``run_cli`` of conftest.py, but the installed wheel's `rules` in a process of its
    own (same arguments, same working folder, same environment overrides)."""

    def run(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None) -> Ran:
        given = input.encode() if isinstance(input, str) else input
        done = subprocess.run(
            [str(installed.bin / "rules"), *args],
            input=given,
            env={**installed.env(), **(env or {})},
            capture_output=True,
            timeout=300,
            check=False,
        )
        decode = lambda b: b.decode("utf-8", errors="replace")  # noqa: E731
        return Ran(done.returncode, decode(done.stdout), decode(done.stderr))

    return run
