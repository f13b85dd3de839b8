"""The README's commands are the ones CI runs, and its examples print what it says."""

from __future__ import annotations

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
