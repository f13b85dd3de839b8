"""Every example of every command's --help runs as written.

The examples run in a fresh folder that holds what a user of the installed engine would
have there: a pack made by `rules init` (`my-pack/`, and `rules/my-pack/`), a model output
`out.txt`, a first prompt `task.md`, a context file, and a model command `model-cli` on
PATH (a stand-in that answers as a model would). `BLOCK` names a block of the shipped
`sentinel` pack, as the parse help says (`rules explain --pack P` lists them). Nothing of
the checkout is there: an example that names a file the wheel does not ship fails.

An example runs when it exits with anything but 2 (usage or pack error) and prints no
traceback or internal error. The few that need what a test cannot start (a PostgreSQL
server, a Dask scheduler, a server that keeps running) are listed in NOT_RUN with the
reason.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from installed import Installed

from conftest import REPO
from engine.cli.main import cli

MARK = "@@HELP-EXAMPLE@@"

NOT_RUN = {
    "postgresql://": "needs a PostgreSQL server",
    "tcp://scheduler": "needs a Dask scheduler",
    "/run/secrets/": "needs a token file the operator provides",
    "rules serve --pack": "starts a server that runs until stopped",
    "rules mcp --pack": "starts an MCP server that runs until its client closes stdin",
    "--view shadow": "reads the sessions of a server's candidate packs (rules serve --shadow)",
}
"""Examples holding one of these texts are not run, for the reason given."""

NOT_RUN_COMMANDS = {
    "choose": "answers the menu of a pack with rounds and menus (tests/policy/test_choices.py)",
    "conflicts": "continues a session of a pack with conflicts (tests/policy/test_conflicts*)",
}


def commands() -> dict[str, click.Command]:
    """Every command and subcommand by its full name (`ledger copy`)."""
    ctx = click.Context(cli)
    found: dict[str, click.Command] = {}
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        found[name] = command
        if isinstance(command, click.Group):
            for sub in command.list_commands(ctx):
                child = command.get_command(ctx, sub)
                assert child is not None
                found[f"{name} {sub}"] = child
    return found


def examples(command: click.Command) -> list[str]:
    """The shell lines of the command's `Examples:` paragraph (continuations joined)."""
    help_text = command.help or ""
    if "Examples" not in help_text:
        return []
    lines = help_text.split("Examples", 1)[1].splitlines()[1:]
    found: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.strip()
        if not line and not pending:
            if found:
                break
            continue
        if line == "\b":
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip() + " "
            continue
        found.append(pending)
        pending = ""
    return found


MODEL_CLI = f"""#!{sys.executable}
# A stand-in model command: the first prompt gets a quoted ANSWER, a repair a good block.
import re, sys
prompt = sys.stdin.read()
nonce = re.search(r"NONCE[:=] ?([0-9A-F]{{6}})", prompt)
n = nonce.group(1) if nonce else "4F2C9A"
answer = "YES" if "format-repair agent" in prompt else '"YES"'
print(f"<<<VERDICT:V1:AC1:NONCE={{n}}>>>")
print(f"ANSWER={{answer}}")
print('REASON="All acceptance criteria are satisfied"')
print(f"<<<END_VERDICT:AC1:NONCE={{n}}>>>")
"""


VERDICT_RUN = ["run", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
VERDICT_RUN += ["--var", "criterion=AC1"]


def build_world(folder: Path, engine_bin: Path | None = None) -> dict[str, str]:
    """A folder with what the examples of command ``name`` name, and the environment to
    run them in: the user's packs (made by `rules init`; `new-pack` and `main-pack`, a
    team's copies of the shipped sentinel pack), outputs, logs of outputs, and sessions
    that earlier runs left (`.rules-session/`, `runs/1`, `runs/42`, a ledger file `a.db`).
    ``engine_bin``: the folder whose `rules` runs (default: this checkout's venv; the
    wheel's venv for the examples as a wheel user runs them)."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    model = bin_dir / "model-cli"
    model.write_text(MODEL_CLI, encoding="utf-8")
    model.chmod(model.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "BLOCK": "VERDICT"}
    engine = engine_bin or Path(sys.executable).parent
    env["PATH"] = os.pathsep.join([str(bin_dir), str(engine), env["PATH"]])
    env.pop("GITHUB_ACTIONS", None)
    env.pop("VIRTUAL_ENV", None)
    env.pop("CI", None)
    env.pop("RULES_LEDGER", None)
    shutil.copy(REPO / "examples" / "sentinel" / "verdict_bad.txt", folder / "out.txt")
    (folder / "task.md").write_text("Is criterion AC1 met? Answer YES or NO.\n", "utf-8")
    (folder / "prompt.txt").write_text("Is criterion AC1 met? Answer YES or NO.\n", "utf-8")
    (folder / "ctx.yaml").write_text("{}\n", encoding="utf-8")
    (folder / "token").write_text("a-long-enough-token-for-the-examples\n", encoding="utf-8")
    gate = REPO / "rules" / "quality-gate" / "examples"
    shutil.copy(gate / "todo.json", folder / "todo.json")
    shutil.copy(gate / "evidence.json", folder / "evidence.json")
    shutil.copy(gate / "todo.json", folder / "outputs.json")
    shutil.copy(
        REPO / "rules" / "quality-gate" / "tests" / "test-outputs.jsonl", folder / "outputs.jsonl"
    )
    (folder / "logs").mkdir()
    shutil.copy(REPO / "examples" / "sentinel" / "records.jsonl", folder / "logs" / "week.jsonl")
    shutil.copy(REPO / "examples" / "sentinel" / "records.jsonl", folder / "records.jsonl")
    for copy in ("new-pack", "main-pack"):
        shutil.copytree(REPO / "rules" / "sentinel", folder / copy)
    setup = [
        ["init", "my-pack", "--dir", "rules"],
        ["init", "my-pack"],
        # The default session holds another item (nonce 5E3D1B), with its outputs kept.
        [*VERDICT_RUN[:6], "5E3D1B", *VERDICT_RUN[7:], "--keep-outputs", "--", "model-cli"],
        [*VERDICT_RUN, "--session", "runs/1", "--", "model-cli"],
        [*VERDICT_RUN, "--session", "runs/42", "--", "model-cli"],
        ["ledger", "copy", "--from", "runs/42", "--to", "a.db"],
    ]
    for args in setup:
        done = subprocess.run(
            ["rules", *args], cwd=folder, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (args, done.stdout + done.stderr)
    return env


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The folder the examples start from, built once (each test runs in a copy)."""
    folder = tmp_path_factory.mktemp("help-world") / "world"
    folder.mkdir()
    return folder, build_world(folder)


@pytest.fixture(scope="session")
def wheel_world(
    tmp_path_factory: pytest.TempPathFactory, installed: Installed
) -> tuple[Path, dict[str, str]]:
    """The same folder, with `rules` the wheel's, installed in a venv of its own."""
    folder = tmp_path_factory.mktemp("help-wheel-world") / "world"
    folder.mkdir()
    return folder, build_world(folder, installed.bin)


def run_examples(
    name: str, world: tuple[Path, dict[str, str]], folder: Path
) -> list[tuple[str, int, str]]:
    """Run the command's examples in order in one shell, in a copy of the world;
    (example, status, output) each. `rules init`'s examples start without `my-pack/`."""
    shutil.copytree(world[0], folder, symlinks=True)
    env = {**world[1], "PATH": world[1]["PATH"].replace(str(world[0]), str(folder))}
    if name == "init":
        shutil.rmtree(folder / "my-pack")
    lines = [x for x in examples(commands()[name]) if not any(k in x for k in NOT_RUN)]
    if name.split()[0] in NOT_RUN_COMMANDS:
        lines = []
    script: list[str] = []
    for line in lines:
        script += [f"echo '{MARK}'", "{", line, "} 2>&1", "echo $?"]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outputs = done.stdout.split(MARK + "\n")[1:]
    assert len(outputs) == len(lines), done.stdout + done.stderr
    results = []
    for line, output in zip(lines, outputs, strict=True):
        text, _, status = output.rstrip("\n").rpartition("\n")
        results.append((line, int(status), text))
    return results


COMMANDS = sorted(name for name, command in commands().items() if examples(command))


def test_the_examples_are_found() -> None:
    assert "run" in COMMANDS and "check" in COMMANDS and "ledger copy" in COMMANDS
    assert examples(commands()["run"])[0].startswith("rules run --pack sentinel")


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_example_runs_as_written(
    name: str, world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    failed = []
    for line, status, output in run_examples(name, world, tmp_path / "fresh"):
        crashed = "Traceback (" in output or "internal error" in output
        if status == 2 or crashed:
            failed.append(f"$ {line}\n{output}\n(exit {status})")
    assert failed == [], "\n\n".join(failed)


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_example_runs_from_the_wheel(
    name: str, wheel_world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """As a wheel user runs them: nothing of the checkout on PATH or in the folder."""
    failed = []
    for line, status, output in run_examples(name, wheel_world, tmp_path / "fresh"):
        crashed = "Traceback (" in output or "internal error" in output
        if status == 2 or crashed:
            failed.append(f"$ {line}\n{output}\n(exit {status})")
    assert failed == [], "\n\n".join(failed)


def test_the_first_run_example_proceeds(world: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The first example of `rules run --help`: the stand-in model answers badly, the
    pack's own first prompt and repair get a good block back."""
    line, status, output = run_examples("run", world, tmp_path / "fresh")[0]
    assert status == 0, f"$ {line}\n{output}"
    assert "-> PROCEED" in output


def test_the_shipped_packs_declare_a_first_prompt_for_each_block() -> None:
    import engine

    for folder in sorted((REPO / "rules").iterdir()):
        pack = engine.load_pack(str(folder))
        missing = sorted(set(pack.model.contracts) - set(pack.model.prompts))
        assert missing == [], f"{folder.name}: no first prompt for {missing}"
