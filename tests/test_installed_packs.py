"""Packs shipped by Python distributions (`rules_engine.packs` entry points): a pack
distribution is built and installed into a fresh venv, then listed, checked, tested and
extended there through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli

PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "acme-packs"
version = "1.2.3"

[project.entry-points."rules_engine.packs"]
answers = "acme_packs.answers"
other = "acme_packs:OTHER"

[tool.setuptools]
packages = ["acme_packs", "acme_packs.answers"]

[tool.setuptools.package-data]
"acme_packs" = ["other/**/*"]
"acme_packs.answers" = ["**/*"]
"""


def build_distribution(root: Path) -> Path:
    source = root / "acme"
    package = source / "acme_packs"
    package.mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text(
        "from pathlib import Path\nOTHER = str(Path(__file__).parent / 'other')\n"
    )
    for name, folder in (("answers", package), ("other", package)):
        assert run_cli("init", name, "--dir", str(folder)).exit_code == 0
    (package / "answers" / "__init__.py").write_text("")
    return source


@pytest.mark.slow
def test_a_pack_distribution_installed_in_a_fresh_venv(tmp_path: Path) -> None:
    source = build_distribution(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # the engine and its dependencies come from this test's environment
    here = sysconfig.get_paths()["purelib"]
    (site / "engine-env.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr

    def rules(*args: str, cwd: Path = tmp_path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(python), "-m", "engine", *args],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=120,
        )

    listed = rules("packs", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["answers"]["address"] == "pkg:answers"
    assert (rows["answers"]["origin"], rows["answers"]["version"]) == ("acme-packs 1.2.3", "0.1.0")
    assert rows["other"]["rulepack"] == "other"
    for ref in ("pkg:answers", "answers", "pkg:other"):
        checked = rules("check", ref)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = rules("test", "pkg:answers")
    assert tested.returncode == 0 and "2 passed" in tested.stdout, tested.stdout
    local = tmp_path / "work" / "mine"
    local.mkdir(parents=True)
    (local / "pack.yaml").write_text(
        textwrap.dedent(
            """\
            rulepack: mine
            version: 1.0.0
            extends: [pkg:answers]
            triggers:
              ANSWER: {on: [PARSE_ERROR], max_attempts: 2, template: repair,
                       after_failure: NEEDS_HUMAN}
            """
        )
    )
    assert rules("check", str(local)).returncode == 0
    good = '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION=NO\nREASON="x"\n'
    good += "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n"
    (local / "out.txt").write_text(good)
    parsed = rules(
        "parse",
        "--pack",
        str(local),
        "--block",
        "ANSWER",
        "--nonce",
        "4F2C9A",
        "--var",
        "question=Q1",
        str(local / "out.txt"),
    )
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["decision"] == "NO"
    missing = rules("check", "pkg:nope")
    assert missing.returncode == 2 and "installed: answers, other" in missing.stderr
