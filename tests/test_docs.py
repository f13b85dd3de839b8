"""The README's commands are the ones CI runs; the README and the docs site print what they
say (every console example runs) and the site builds strictly."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sentinel_cases import VERDICT_ARGS
from test_packaging import readme_commands

from conftest import REPO, run_cli


def test_ci_runs_exactly_the_readme_commands() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in readme_commands():
        assert command in ci


def documents() -> list[Path]:
    """The README and every page of the documentation site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def all_text() -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in documents())


def test_the_readme_is_a_front_door_of_at_most_200_lines() -> None:
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, len(lines)


def test_the_readme_python_loop_is_the_file_the_tour_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split("```python\n", 1)[1].split("```", 1)[0]
    assert shown == (REPO / "docs" / "examples" / "loop.py").read_text(encoding="utf-8")
    assert "$ .venv/bin/python docs/examples/loop.py" in readme


def test_the_python_api_examples_run_or_say_why_not() -> None:
    """docs/api.md's Python blocks: each is a file one of its console examples runs, or is
    marked `<!-- not run: ... -->` (it needs a client package and an API key)."""
    page = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    files = {p.read_text(encoding="utf-8"): p.name for p in (REPO / "docs/examples").glob("*.py")}
    parts = page.split("```python\n")
    assert len(parts) >= 5, "the loop, the async example and three client wrappers"
    for before, block in itertools.pairwise(parts):
        code = block.split("```", 1)[0]
        if code in files:
            assert f"$ .venv/bin/python docs/examples/{files[code]}" in page
        else:
            assert before.rstrip().splitlines()[-1].startswith("<!-- not run: "), code
    assert "engine.arun(" in (REPO / "docs/examples/arun_loop.py").read_text(encoding="utf-8")


def test_every_link_of_the_readme_leads_to_a_file() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(targets) >= 15, targets
    local = [x for x in targets if "://" not in x]
    assert [x for x in local if not (REPO / x).is_file()] == []


def test_every_command_has_its_exit_codes_in_the_readme_and_the_commands_page() -> None:
    from engine.cli.main import cli

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    page = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    table = [line for line in readme.splitlines() if line.startswith("| `rules ")]
    for name in cli.commands:
        assert any(f"`rules {name}" in row or f"`{name}`" in row for row in table), name
        assert f"`{name}`" in page or f"`{name} ...`" in page, name


def test_the_example_packs_shown_are_the_ones_the_examples_run() -> None:
    docs = REPO / "docs"
    json_page = (docs / "format" / "json.md").read_text(encoding="utf-8")
    schema = json_page.split("```json\n", 1)[1].split("```", 1)[0]
    assert schema == (docs / "examples/json/schemas/task.schema.json").read_text(encoding="utf-8")
    text_page = (docs / "format" / "text.md").read_text(encoding="utf-8")
    contracts = text_page.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert contracts in (docs / "examples/text/pack.yaml").read_text(encoding="utf-8")


def test_no_page_cites_a_document_users_do_not_have() -> None:
    text = all_text()
    for cited in ("seed 00", "SENTINEL_GRAMMARS", "parse-blocks.py", "DESIGN §", "DESIGN.md"):
        assert cited not in text, cited


def test_parse_examples_print_what_the_docs_show() -> None:
    text = all_text()
    for name in ("verdict.txt", "verdict_bad.txt"):
        result = run_cli(
            "parse",
            *VERDICT_ARGS,
            str(REPO / "examples" / "sentinel" / name),
        )
        shown = (result.stdout or result.stderr).strip()
        assert shown in text


def test_render_one_liner_works_with_a_model_command(tmp_path: Path) -> None:
    line = next(x for x in all_text().splitlines() if x.startswith("rules render ") and "|" in x)
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
        *VERDICT_ARGS,
        str(tmp_path / "repaired.txt"),
    )
    assert repaired.exit_code == 0, repaired.stderr
    assert json.loads(repaired.stdout)["answer"] == "YES"


@pytest.mark.heavy
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: no broken link or anchor, no page left out of the nav, and
    every object the API page names has its docstrings (CI installs the `docs` extra)."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (pip install -e '.[docs]'); CI runs this build")
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "mkdocs"),
            "build",
            "--strict",
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# ------------------------------------------------------------------ every console example

MARK = "@@README-COMMAND@@"


def console_blocks(document: str) -> list[list[tuple[str, list[str]]]]:
    """Each ```console block as (command, expected output lines) pairs. A block whose output
    shows fenced text opens with more backticks (````console) and closes on as many."""
    blocks: list[list[tuple[str, list[str]]]] = []
    fence = ""  # the fence of the block the line is in ("" outside every block)
    inside = False
    for line in document.splitlines():
        ticks = line[: len(line) - len(line.lstrip("`"))]
        if fence and ticks.startswith(fence) and not line.strip("`").strip():
            fence, inside = "", False  # the line closing the block
            continue
        if not fence and len(ticks) >= 3:
            fence = ticks
            inside = line.strip() == ticks + "console"
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


def test_every_document_has_console_examples_and_the_readme_the_tour() -> None:
    counts = {
        path.relative_to(REPO).as_posix(): len(console_blocks(path.read_text(encoding="utf-8")))
        for path in documents()
    }
    assert counts["README.md"] >= 4, counts
    assert sum(counts.values()) >= 30, counts


@pytest.mark.parametrize(
    "document", [path.relative_to(REPO).as_posix() for path in documents()], ids=str
)
@pytest.mark.heavy
def test_every_console_example_prints_what_it_shows(document: str, tmp_path: Path) -> None:
    """Each ```console block of the README and of every page under docs/ runs as one shell
    session, the blocks of a document in order in one copy of the files they use; every
    command with output shown must print exactly that (stdout and stderr together), every
    other command must run without an internal error."""
    work = tmp_path / "clone"
    for folder in ("rules", "examples", "tests/fixtures", "docs", "contracts"):
        shutil.copytree(REPO / folder, work / folder)
    # .venv/bin/python must find its venv (pyvenv.cfg beside bin/) to import the engine.
    venv = Path(sys.executable).parent.parent
    if (venv / "pyvenv.cfg").is_file():
        (work / ".venv").symlink_to(venv)
    else:
        (work / ".venv").mkdir()
        (work / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GITHUB_ACTIONS", None)
    env.pop("CI", None)
    blocks = console_blocks((REPO / document).read_text(encoding="utf-8"))
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
