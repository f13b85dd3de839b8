"""The README's commands are the ones CI runs, and its examples print what it says."""

from __future__ import annotations

import json
import os
import re
import shutil
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
        result = run_cli(
            "parse",
            "--pack",
            "sentinel",
            "--block",
            "VERDICT",
            "--nonce",
            "4F2C9A",
            "--var",
            "criterion=AC1",
            str(REPO / "examples" / "sentinel" / name),
        )
        shown = (result.stdout or result.stderr).strip()
        assert shown in readme


def test_readme_render_one_liner_works_with_a_model_command(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    line = next(x for x in readme.splitlines() if x.startswith("rules render ") and "|" in x)
    command = line.replace(
        "model-cli", f"{sys.executable} {REPO / 'examples' / 'fake_model.py'}"
    ).replace("out.txt", str(REPO / "examples" / "sentinel" / "verdict_bad.txt"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    repaired = run_cli(
        "parse",
        "--pack",
        "sentinel",
        "--block",
        "VERDICT",
        "--nonce",
        "4F2C9A",
        "--var",
        "criterion=AC1",
        str(tmp_path / "repaired.txt"),
    )
    assert repaired.exit_code == 0, repaired.stderr
    assert json.loads(repaired.stdout)["answer"] == "YES"


# ------------------------------------------------------------------ every console example

MARK = "@@README-COMMAND@@"


def console_blocks(readme: str) -> list[list[tuple[str, list[str]]]]:
    """Each ```console block as (command, expected output lines) pairs."""
    blocks: list[list[tuple[str, list[str]]]] = []
    inside = False
    for line in readme.splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```console"
            if inside:
                blocks.append([])
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            blocks[-1].append((line[2:], []))
        else:
            blocks[-1][-1][1].append(line)
    return blocks


def matches(expected: list[str], actual: list[str]) -> bool:
    """A line `...` stands for any lines; `...` inside a line for any text there."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    line = actual[0]
    pattern = ".*".join(re.escape(part) for part in head.split("..."))
    return re.fullmatch(pattern, line) is not None and matches(rest, actual[1:])


def test_matching_of_elided_examples() -> None:
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["ab..."], ["abc"])
    assert matches(["[fix: a ...]"], ["[fix: a b, c]"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["x..."], ["abc"])


def test_every_console_example_of_the_readme_prints_what_it_shows(tmp_path: Path) -> None:
    """Each ```console block runs as one shell session in a copy of the files it uses;
    every command with output shown must print exactly that (stdout and stderr together),
    every other command must run without an internal error."""
    work = tmp_path / "clone"
    for folder in ("rules", "examples", "tests/fixtures"):
        shutil.copytree(REPO / folder, work / folder)
    (work / ".venv").mkdir()
    (work / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    blocks = console_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    for block in blocks:
        script = ["__s=0"]
        for command, _ in block:
            script += [f"echo '{MARK}'", "(exit $__s)", f"{command} 2>&1", "__s=$?"]
        done = subprocess.run(
            ["bash", "-c", "\n".join(script)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        outputs = done.stdout.split(MARK + "\n")[1:]
        assert len(outputs) == len(block), done.stdout + done.stderr
        for (command, expected), output in zip(block, outputs, strict=True):
            actual = output.splitlines()
            crashed = [x for x in actual if x.startswith(("internal error:", "Traceback ("))]
            assert crashed == [], f"$ {command}\n{output}"
            if expected:
                assert matches(expected, actual), f"$ {command}\n{output}"
