"""The README's commands are the ones CI runs, and its examples print what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_packaging import readme_commands

from conftest import REPO, run_cli


def test_ci_runs_exactly_the_readme_commands() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in readme_commands():
        assert command in ci


def test_readme_parse_examples_print_what_the_readme_shows() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for name in ("verdict.txt", "verdict_bad.txt"):
        result = run_cli("parse", "--pack", "sentinel", "--block", "VERDICT", "--nonce",
                         "4F2C9A", "--var", "criterion=AC1",
                         str(REPO / "examples" / "sentinel" / name))
        shown = (result.stdout or result.stderr).strip()
        assert shown in readme


def test_readme_render_one_liner_works_with_a_model_command(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("rules render ") and "|" in x)
    command = (line.replace("model-cli", f"{sys.executable} {REPO / 'examples' / 'fake_model.py'}")
               .replace("out.txt", str(REPO / "examples" / "sentinel" / "verdict_bad.txt")))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    repaired = run_cli("parse", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A",
                       "--var", "criterion=AC1", str(tmp_path / "repaired.txt"))
    assert repaired.exit_code == 0, repaired.stderr
    assert json.loads(repaired.stdout)["answer"] == "YES"
