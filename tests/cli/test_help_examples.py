"""Every example of every command's --help runs as written.

The examples run in a fresh folder that holds what a user of the installed engine would
have there: a pack made by `rules init` (`my-pack/`, and `rules/my-pack/`), a model output
`out.txt`, a first prompt `task.md`, a context file, and a model command `model-cli` on
PATH (a stand-in that answers as a model would). `BLOCK` names a block of the shipped
`sentinel` pack, as the parse help says (`rules explain --pack P` lists them). Nothing of
the checkout is there: an example that names a file the wheel does not ship fails.

An example runs when it exits with anything but 2 (usage or pack error) and prints no
traceback or internal error. An example that names a service (SERVICES: a PostgreSQL
server, a Dask scheduler, a server that keeps running) runs in a test that starts the
service: a real PostgreSQL server (tests/pg_server.py), a local Dask cluster
(tests/dask_cluster.py), or the example's own `rules serve` / `rules mcp` as a process the
test talks to. Its placeholders are replaced by the service's real address, and only
those (PLACEHOLDERS); it must exit 0 and print what EXPECTED says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
import pytest
from dask_cluster import dask_cluster
from installed import Installed
from pg_server import PASSWORD, PostgresServer
from rounds_world import HELP, build_rounds_state

from conftest import REPO
from engine.cli.main import cli

MARK = "@@HELP-EXAMPLE@@"

SERVICES = {
    "rules serve --pack": "server",
    "--view shadow": "server",
    "rules mcp --pack": "mcp",
    "postgresql://": "postgresql",
    "tcp://scheduler": "dask",
}
"""An example holding one of these texts needs the service named (the first that
matches): `server` a running `rules serve` (`--view shadow` reads what a server's
candidate packs recorded), `mcp` a client on the stdin of `rules mcp`. The plain tests
leave these out; the tests below start the service and run them."""

PLACEHOLDERS = {
    r"postgresql://\S+": "postgresql",  # a new database on the test's PostgreSQL server
    r"tcp://scheduler:8786": "scheduler",  # the local Dask cluster's scheduler
    r"/shared/logs/": "logs/",  # the cluster's shared folder: the folder's own logs/
    r"/run/secrets/rules-token": "token",  # the operator's token file: the folder's own
    r"--port 8080": "--port {port}",  # a free port: other tests serve beside this one
}
"""What an example's placeholder becomes in the tests (regex -> a fixed text, or the
name of a value the test has: `postgresql` a database URL, `scheduler` an address,
`{port}` a free port). A `rules serve` example that leaves the port at its default (8080)
gets `--port {port}` added."""

EXPECTED = {
    "rules budgets --pack ./my-pack --ledger": "my-pack",
    "rules ledger copy --from .rules-session --to postgresql": "copied",
    "--to postgresql://rules@db:5432/rules --as nightly": "copied",
    "--session nightly --to back.db": "copied",
    "--ledger postgresql://rules@db:5432/rules --session nightly": "records  2",
    "--scheduler tcp://scheduler:8786": "flipped  0",
    "rules log --session sessions --view shadow": "sentinel",
}
"""A text each service example's output must hold (the plain tests check the exit status)."""

ROUNDS_COMMANDS = ("choose", "conflicts")
"""Commands whose examples answer a pending menu or work on a session's conflicts: they
run in a folder where `my-pack` is a pack with rounds, menus and conflicts (blocks `author`
and `critic`) and session `runs/1` holds pending menus of rounds 3 and 4 (rounds_world).
They take about 10 s (each command opens a pack of rounds, menus and conflicts): slow."""

RESULTS = {
    "rules choose --session runs/1 author@3 1": (0, "  author: SKIP"),
    "rules choose --session runs/1 --context ctx.yaml author@4 3": (0, "RETRY ATTEMPT 4 of 4"),
    "rules choose --session runs/1 --resume": (0, "runs/1: resumed"),
    "rules conflicts detect": (0, "flag ID-7 (HIGH): not addressed"),
    "rules conflicts convert --session runs/1 ID-7": (0, "### Conflict: ID-7"),
    "rules conflicts propose --session runs/1 ID-3": (0, "**Synthesized Option (Option C):**"),
    "rules conflicts resolve --session runs/1 ID-3": (0, "ID-3: resolved with option C"),
    "rules conflicts list --session runs/1 --open": (0, "ID-7"),
    "rules conflicts termination --session runs/1 COMPLETE": (1, "COMPLETE: blocked"),
}
"""The exit status and a text of the output of those examples, as their help says: a
choice is recorded (0); ID-7 was converted and not resolved, so it blocks COMPLETE (1)."""


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
    run them in: the user's packs (made by `rules init`; `new-pack`, `main-pack` and
    `sentinel-next`, a team's copies of the shipped sentinel pack), outputs, logs of
    outputs, and sessions that earlier runs left (`.rules-session/`, `runs/1`, `runs/42`,
    a ledger file `a.db`); in `.rounds/`, the state of ROUNDS_COMMANDS' examples.
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
    for copy in ("new-pack", "main-pack", "sentinel-next"):
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


def service_of(line: str) -> str | None:
    """The service the example needs (SERVICES), or None."""
    return next((service for text, service in SERVICES.items() if text in line), None)


def substituted(line: str, values: dict[str, str]) -> str:
    """The example with its placeholders replaced (PLACEHOLDERS), as the tests run it."""
    for pattern, replacement in PLACEHOLDERS.items():
        text = values.get(replacement, replacement).replace("{port}", values.get("port", ""))
        line = re.sub(pattern, lambda _: text, line)  # noqa: B023  # used at once
    if line.startswith("rules serve --pack") and "--port" not in line:
        line += f" --port {values['port']}"
    return line


def copy_world(name: str, world: tuple[Path, dict[str, str]], folder: Path) -> dict[str, str]:
    """A copy of the world in ``folder`` and its environment. `rules init`'s examples
    start without `my-pack/`."""
    shutil.copytree(world[0], folder, symlinks=True)
    env = {**world[1], "PATH": world[1]["PATH"].replace(str(world[0]), str(folder))}
    if name == "init":
        shutil.rmtree(folder / "my-pack")
    if name.split()[0] in ROUNDS_COMMANDS:  # my-pack and runs/1 as their examples need
        build_rounds_state(folder, env, HELP)
    return env


def run_lines(lines: list[str], folder: Path, env: dict[str, str]) -> list[tuple[int, str]]:
    """Run ``lines`` in order in one shell in ``folder``: (status, output) each."""
    script: list[str] = []
    for line in lines:
        # The status on a line of its own, after an output without a final newline too.
        script += [f"echo '{MARK}'", "{", line, "} 2>&1", "__s=$?", "echo", "echo $__s"]
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
    for output in outputs:
        text, _, status = output.rstrip("\n").rpartition("\n")
        results.append((int(status), text.removesuffix("\n")))
    return results


def run_examples(
    name: str, world: tuple[Path, dict[str, str]], folder: Path
) -> list[tuple[str, int, str]]:
    """Run the command's examples that need no service in order in one shell, in a copy of
    the world; (example, status, output) each."""
    env = copy_world(name, world, folder)
    lines = [x for x in examples(commands()[name]) if service_of(x) is None]
    return [(line, *done) for line, done in zip(lines, run_lines(lines, folder, env), strict=True)]


COMMANDS = sorted(name for name, command in commands().items() if examples(command))
DEFAULT_RUN = [
    pytest.param(x, marks=pytest.mark.slow) if x.split()[0] in ROUNDS_COMMANDS else x
    for x in COMMANDS
]


def test_the_examples_are_found() -> None:
    assert "run" in COMMANDS and "check" in COMMANDS and "ledger copy" in COMMANDS
    assert examples(commands()["run"])[0].startswith("rules run --pack sentinel")


@pytest.mark.heavy
@pytest.mark.parametrize("name", DEFAULT_RUN)
def test_every_help_example_runs_as_written(
    name: str, world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    failed = []
    for line, status, output in run_examples(name, world, tmp_path / "fresh"):
        crashed = "Traceback (" in output or "internal error" in output
        expected = next((v for k, v in RESULTS.items() if line.startswith(k)), None)
        if (
            status == 2
            or crashed
            or (expected and (status, expected[1] in output) != (expected[0], True))
        ):
            failed.append(f"$ {line}\n{output}\n(exit {status}; expected {expected})")
    assert failed == [], "\n\n".join(failed)


def test_every_rounds_example_has_its_result() -> None:
    """Each example of the rounds commands has its status and output in RESULTS."""
    lines = [
        x
        for name in COMMANDS
        if name.split()[0] in ROUNDS_COMMANDS
        for x in examples(commands()[name])
    ]
    assert len(lines) == len(RESULTS)
    assert all(sum(x.startswith(k) for x in lines) == 1 for k in RESULTS), lines


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


@pytest.mark.heavy
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


# ------------------------------------------------------- the examples that need a service


def service_examples(service: str) -> dict[str, list[str]]:
    """The examples needing ``service`` by command, in each command's order."""
    found: dict[str, list[str]] = {}
    for name in COMMANDS:
        lines = [x for x in examples(commands()[name]) if service_of(x) == service]
        if lines:
            found[name] = lines
    return found


def check_ran(line: str, status: int, output: str, secret: str = "") -> None:
    """The example exited 0, printed what EXPECTED says, no traceback and no secret."""
    shown = f"$ {line}\n{output}\n(exit {status})"
    assert status == 0, shown
    assert "Traceback (" not in output and "internal error" not in output, shown
    assert not secret or secret not in output, shown
    for text, expected in EXPECTED.items():
        if text in line:
            assert expected in output, shown


def test_every_example_is_run_by_one_test() -> None:
    """Each example either needs no service or needs one a test below starts."""
    services = {service_of(x) for name in COMMANDS for x in examples(commands()[name])}
    assert services == {None, "server", "mcp", "postgresql", "dask"}
    for service in ("server", "mcp", "postgresql", "dask"):
        assert service_examples(service), service


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(service_examples("postgresql")))
def test_the_postgresql_examples_run_on_a_real_server(
    name: str, world: tuple[Path, dict[str, str]], tmp_path: Path, postgres_server: PostgresServer
) -> None:
    run_postgresql_examples(name, world, tmp_path, postgres_server)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(service_examples("postgresql")))
def test_the_postgresql_examples_run_from_the_wheel(
    name: str,
    wheel_world: tuple[Path, dict[str, str]],
    tmp_path: Path,
    postgres_server: PostgresServer,
) -> None:
    """As a wheel user with the postgres extra runs them: nothing of the checkout on PATH."""
    run_postgresql_examples(name, wheel_world, tmp_path, postgres_server)


def run_postgresql_examples(
    name: str, world: tuple[Path, dict[str, str]], tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """On a new database of the test's PostgreSQL server, which holds the sessions the
    examples read (`nightly`, `s1`: copies of `.rules-session/`, which kept its outputs)
    unless the examples make them (`rules ledger copy`)."""
    folder = tmp_path / "fresh"
    env = copy_world(name, world, folder)
    url = postgres_server.create_database()
    setup = [] if name.startswith("ledger") else ["nightly", "s1"]
    for session in setup:
        seeded = run_lines(
            [f"rules ledger copy --from .rules-session --to '{url}' --as {session}"], folder, env
        )
        assert seeded[0][0] == 0, seeded
    lines = service_examples("postgresql")[name]
    runs = run_lines([substituted(x, {"postgresql": f"'{url}'"}) for x in lines], folder, env)
    for line, (status, output) in zip(lines, runs, strict=True):
        check_ran(line, status, output, PASSWORD)


@pytest.mark.slow
def test_the_dask_example_runs_on_a_local_cluster(
    world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    run_dask_example(world, tmp_path)


@pytest.mark.slow
def test_the_dask_example_runs_from_the_wheel(
    wheel_world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """As a wheel user with the dask extra runs it: nothing of the checkout on PATH."""
    run_dask_example(wheel_world, tmp_path)


def run_dask_example(world: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """`--scheduler tcp://scheduler:8786` reaches a scheduler and two workers started apart;
    the cluster's shared folder `/shared/logs/` is the folder's own `logs/`."""
    pytest.importorskip("distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    [(name, lines)] = service_examples("dask").items()
    folder = tmp_path / "fresh"
    env = copy_world(name, world, folder)
    with dask_cluster(tmp_path) as address:
        runs = run_lines([substituted(x, {"scheduler": address}) for x in lines], folder, env)
    for line, (status, output) in zip(lines, runs, strict=True):
        check_ran(line, status, output)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def started(line: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """The example as a process of its own (bash execs it), its output in `server.log`."""
    with open(folder / "server.log", "w", encoding="utf-8") as sink:
        return subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE if line.startswith("rules mcp") else subprocess.DEVNULL,
            stdout=subprocess.PIPE if line.startswith("rules mcp") else sink,
            stderr=sink if line.startswith("rules mcp") else subprocess.STDOUT,
            text=True,
        )


def stopped(process: subprocess.Popen[str]) -> int:
    """The exit status of a server sent SIGTERM (by its PID), as an operator stops it."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=20)


@pytest.mark.slow
def test_the_server_examples_serve_a_repair_loop(
    world: tuple[Path, dict[str, str]], tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """Each `rules serve` example starts a server (on a free port; the PostgreSQL one on a
    new database) that answers a failing output with REPAIR and stops with status 0 on
    SIGTERM; then `rules log --view shadow` shows what the candidate pack recorded."""
    import httpx

    folder = tmp_path / "fresh"
    env = copy_world("serve", world, folder)
    token = (folder / "token").read_text(encoding="utf-8").strip()
    bad = (REPO / "examples" / "sentinel" / "verdict_bad.txt").read_text(encoding="utf-8")
    body = {"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A", "output": bad}
    body["vars"] = {"criterion": "AC1"}
    server_lines = service_examples("server")
    serve_lines = [x for name in server_lines if name != "log" for x in server_lines[name]]
    for index, line in enumerate(serve_lines):
        port = free_port()
        values = {"port": str(port), "postgresql": f"'{postgres_server.create_database()}'"}
        process = started(substituted(line, values), folder, env)
        headers = {"authorization": f"Bearer {token}"} if "--token-file" in line else {}
        answer = None
        try:
            deadline = time.monotonic() + 120
            while answer is None and process.poll() is None and time.monotonic() < deadline:
                try:
                    answer = httpx.post(
                        f"http://127.0.0.1:{port}/v1/sessions/S{index}/outputs",
                        json=body,
                        headers=headers,
                        timeout=30,
                    )
                except httpx.TransportError:
                    time.sleep(0.2)
        finally:
            status = stopped(process)
        output = (folder / "server.log").read_text(encoding="utf-8", errors="replace")
        assert answer is not None, f"$ {line}\n{output}\n(exit {status})"
        assert answer.status_code == 200, f"$ {line}\n{answer.text}\n{output}"
        assert answer.json()["decision"]["action"] == "REPAIR", answer.text
        check_ran(line, status, output, PASSWORD)
    log_lines = server_lines["log"]
    for line, (status, output) in zip(log_lines, run_lines(log_lines, folder, env), strict=True):
        check_ran(line, status, output)


MCP_CALLS: list[dict[str, Any]] = [
    {
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "help-examples", "version": "1"},
        },
    },
    {"method": "notifications/initialized"},
    {
        "method": "tools/call",
        "params": {
            "name": "evaluate_output",
            "arguments": {
                "pack": "sentinel",
                "block": "VERDICT",
                "nonce": "4F2C9A",
                "vars": {"criterion": "AC1"},
                "output": 'ANSWER="YES"\n',
                "session": "s",
            },
        },
    },
]


@pytest.mark.slow
def test_the_mcp_examples_answer_a_client_on_stdin(
    world: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Each `rules mcp` example, with this test as its client on stdin (newline-delimited
    JSON-RPC): initialize, then evaluate_output of a failing VERDICT in a session; the
    answer holds the decision, and closing stdin ends the server with status 0."""
    [(name, lines)] = service_examples("mcp").items()
    folder = tmp_path / "fresh"
    env = copy_world(name, world, folder)
    for index, line in enumerate(lines):
        process = started(line, folder, env)
        assert process.stdin is not None and process.stdout is not None
        answers: dict[int, Any] = {}
        try:
            for number, call in enumerate(MCP_CALLS, 1):
                message: dict[str, Any] = {"jsonrpc": "2.0", **call}
                if call["method"] == "tools/call":  # a session of its own per example
                    arguments = {**call["params"]["arguments"], "session": f"s{index}"}
                    message["params"] = {**call["params"], "arguments": arguments}
                if not call["method"].startswith("notifications/"):
                    message["id"] = number
                process.stdin.write(json.dumps(message) + "\n")
                process.stdin.flush()
                if "id" in message:
                    answer = json.loads(process.stdout.readline() or "null")
                    assert answer is not None, f"$ {line}: no answer to {call['method']}"
                    answers[answer["id"]] = answer
            process.stdin.close()
            status = process.wait(timeout=60)
        finally:
            stopped(process)
            process.stdout.close()
        output = (folder / "server.log").read_text(encoding="utf-8", errors="replace")
        check_ran(line, status, output)
        result = answers[3]["result"]
        assert result.get("isError") is not True, result
        decision = result["structuredContent"]["decision"]
        assert (decision["action"], decision["attempt"]) == ("REPAIR", 1), (line, result)
        if "--ledger rules.db" in line:  # in the working folder (it was sqlite:///rules.db: /)
            assert (folder / "rules.db").is_file(), line
