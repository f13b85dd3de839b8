"""Done means (issue 35, secrets): every command that takes a ledger URL, given one whose
password holds an '@' (psycopg once showed "failed to resolve host 'SecretTail91@127.0.0.1'"),
run against a PostgreSQL that fails in five ways, never prints any piece of the password
four characters long or longer, on stdout or stderr; it exits 2 with a message instead.

The commands run as the user runs them (the installed `rules` script, a process each). The
commands the issue's row names run in the default suite; every other command that takes
``--ledger`` runs under ``-m slow``, and a test checks that the table below names every
such command, so a new one cannot be left out."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import click
import pytest
from pg_server import PostgresServer

from conftest import REPO, script
from engine.cli.main import cli

SECRET = "Top@SecretTail91"
"""The password of every URL here: its '@' is the one a URL parser may take for the host's."""

FAILURES = ("unresolvable host", "closed port", "wrong password", "missing database", "hang-up")

OUTPUT = "VERDICT ok\n"
CONFLICT = REPO / "tests" / "policy" / "test_conflicts.py"


def leaked(text: str, secret: str = SECRET) -> list[str]:
    """Every piece of ``secret`` at least 4 characters long that ``text`` shows."""
    return sorted(
        {
            secret[i:j]
            for i in range(len(secret))
            for j in range(i + 4, len(secret) + 1)
            if secret[i:j] in text
        }
    )


def test_leaked_finds_a_tail() -> None:
    assert "SecretTail91" in leaked("failed to resolve host 'SecretTail91@127.0.0.1'")
    assert leaked("postgresql://u:***@127.0.0.1/rules") == []


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def hang_up_port() -> Iterator[int]:
    """A port whose server accepts each connection and closes it at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    listener.close()


@pytest.fixture(scope="module")
def leaky_role(postgres_server: PostgresServer) -> PostgresServer:
    """The test server with a role whose password is ``SECRET`` (for a missing database,
    the password must be right)."""
    import psycopg

    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS leaky")
        conn.execute(f"CREATE ROLE leaky LOGIN PASSWORD '{SECRET}'")
    return postgres_server


@pytest.fixture
def failing_url(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """The URL (its password ``SECRET``, written as is) that fails the named way."""

    def url(failure: str) -> str:
        if failure == "unresolvable host":
            return f"postgresql://u:{SECRET}@nohost.invalid:5432/rules"
        if failure == "closed port":
            return f"postgresql://u:{SECRET}@127.0.0.1:{_closed_port()}/rules"
        if failure == "hang-up":
            port = request.getfixturevalue("hang_up_port")
            return f"postgresql://u:{SECRET}@127.0.0.1:{port}/rules"
        server: PostgresServer = request.getfixturevalue("leaky_role")
        if failure == "wrong password":
            return f"postgresql://rules:{SECRET}@127.0.0.1:{server.port}/postgres"
        return f"postgresql://leaky:{SECRET}@127.0.0.1:{server.port}/no_such_database"

    return url


def _files(folder: Path) -> dict[str, str]:
    """The inputs the commands read, written in ``folder``."""
    files = {"out": OUTPUT, "prompt": "Say it.\n", "state": "{}\n"}
    paths = {}
    for name, text in files.items():
        paths[name] = str(folder / f"{name}.txt")
        Path(paths[name]).write_text(text, encoding="utf-8")
    return paths


def _source_ledger(folder: Path) -> str:
    """A SQLite session folder with one attempt: a copy's source."""
    session = folder / "source"
    subprocess.run(
        [script("rules"), "eval", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "n1",
         "--var", "criterion=x", "--session", str(session), _files(folder)["out"]],
        capture_output=True, check=False, cwd=folder, timeout=120,
    )  # fmt: skip
    return str(session)


SENTINEL = "--pack sentinel --block VERDICT --nonce n1 --var criterion=x"
SESSION = "--session s --ledger URL"

# command -> its arguments; URL is replaced by the failing URL, {name} by a file's path
COMMANDS: dict[str, list[str]] = {
    name: words.split()
    for name, words in {
        "log": "log --ledger URL",
        "eval": f"eval {SENTINEL} {SESSION} {{out}}",
        "ledger copy --from": "ledger copy --from URL --to copy.db",
        "ledger copy --to": "ledger copy --from {source} --to URL",
        "serve": "serve --pack sentinel --port 0 --ledger URL",
        "mcp": "mcp --pack sentinel --ledger URL",
        "serve --shadow-ledger": "serve --pack sentinel --port 0 --shadow sentinel=sentinel "
        "--shadow-ledger URL",
        "render": f"render {SENTINEL} {SESSION} {{out}}",
        "prompt": f"prompt {SENTINEL} {SESSION}",
        "run": f"run {SENTINEL} --prompt {{prompt}} {SESSION} -- cat",
        "report": f"report {SESSION}",
        "export": f"export {SESSION}",
        "budgets": f"budgets --pack sentinel {SESSION}",
        "choose": f"choose {SESSION} item1 opt1",
        "backtest": f"backtest --pack sentinel {SESSION}",
        "gate": f"gate --pack quality-gate --stage PLAN {SESSION} {{state}}",
        "conflicts list": f"conflicts list {SESSION}",
        "conflicts convert": f"conflicts convert {SESSION} X-1",
        "conflicts waive": f"conflicts waive {SESSION} X-1",
        "conflicts termination": f"conflicts termination {SESSION} x",
        "conflicts propose": f"conflicts propose {SESSION} X-1 --synthesis s --trade-off t",
        "conflicts resolve": f"conflicts resolve {SESSION} X-1 --option A --decision d "
        "--rationale r",
        "conflicts detect": f"conflicts detect --pack gap-review {SESSION} "
        "--context {conflict_context} {conflict_output}",
        "review list": f"review list {SESSION}",
        "review show": f"review show {SESSION} 1",
        "review claim": f"review claim {SESSION} 1 --by a",
        "review release": f"review release {SESSION} 1 --by a",
        "review approve": f"review approve {SESSION} 1 --by a",
        "review edit": f"review edit {SESSION} 1 --by a --pack sentinel --output {{out}}",
        "review reject": f"review reject {SESSION} 1 --by a --reason r",
    }.items()
}
NAMED_IN_THE_ISSUE = ("log", "eval", "ledger copy --from", "ledger copy --to", "serve")

# `rules serve` imports the server's libraries before it reaches the ledger (3 s a case on
# 2 cores): its five cases run with the heavy tests (`pytest -m heavy`, in CI).
NAMED_CASES = [
    pytest.param(command, marks=pytest.mark.heavy) if command == "serve" else command
    for command in NAMED_IN_THE_ISSUE
]


def _conflict_inputs(folder: Path) -> dict[str, str]:
    """A gap-review output whose conflict block passes (from the conflicts tests)."""
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location("conflict_cases", CONFLICT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    context = {"known_gaps": ["GAP-FLOW-001"], "round": 6,
               "known_issues": module.CASES[0]["issues"]}  # fmt: skip
    (folder / "conflict.yaml").write_text(yaml.safe_dump(context), encoding="utf-8")
    (folder / "conflict.md").write_text(module.HEADER + module.EXAMPLE_1_SECTION, encoding="utf-8")
    return {
        "conflict_context": str(folder / "conflict.yaml"),
        "conflict_output": str(folder / "conflict.md"),
    }


def _run(command: str, url: str, folder: Path, via_environment: bool = False) -> str:
    """Run ``command`` with ``url``; its stdout and stderr, after checking it exited 2
    with an error message."""
    names = _files(folder)
    if "{source}" in COMMANDS[command]:
        names["source"] = _source_ledger(folder)
    if "{conflict_output}" in COMMANDS[command]:
        names.update(_conflict_inputs(folder))
    args = [a.format(**names) if "{" in a else a for a in COMMANDS[command]]
    env = {k: v for k, v in os.environ.items() if k not in ("RULES_LEDGER", "GITHUB_ACTIONS")}
    if via_environment:
        at = args.index("URL")
        del args[at - 1 : at + 1]
        env["RULES_LEDGER"] = url
    else:
        args[args.index("URL")] = url
    done = subprocess.run(
        [script("rules"), *args], capture_output=True, cwd=folder, env=env, timeout=120
    )
    shown = (done.stdout + done.stderr).decode("utf-8", "replace")
    assert done.returncode == 2, shown
    assert "error: " in shown and "Traceback" not in shown and "internal error" not in shown
    return shown


def _check(command: str, failure: str, url: str, folder: Path, env: bool = False) -> None:
    shown = _run(command, url, folder, via_environment=env)
    assert leaked(shown) == [], shown
    assert leaked(shown, quote(SECRET, safe="")) == [], shown


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("command", NAMED_CASES)
def test_the_commands_of_the_issue_never_show_the_password(
    command: str, failure: str, failing_url: Callable[[str], str], tmp_path: Path
) -> None:
    _check(command, failure, failing_url(failure), tmp_path)


@pytest.mark.parametrize("failure", FAILURES)
def test_rules_ledger_in_the_environment_never_shows_the_password(
    failure: str, failing_url: Callable[[str], str], tmp_path: Path
) -> None:
    _check("log", failure, failing_url(failure), tmp_path, env=True)


@pytest.mark.slow
@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in NAMED_IN_THE_ISSUE])
def test_every_other_command_never_shows_the_password(
    command: str, failure: str, failing_url: Callable[[str], str], tmp_path: Path
) -> None:
    _check(command, failure, failing_url(failure), tmp_path)


def _ledger_commands(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Every command (as a path of names) with an option that takes a ledger URL."""
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None
            yield from _ledger_commands(sub, (*path, name))
        return
    takes = {o for p in command.params for o in p.opts if "ledger" in o or o in ("--from", "--to")}
    for option in sorted(takes):
        yield " ".join(path) if option == "--ledger" else f"{' '.join(path)} {option}"


def test_the_table_names_every_command_that_takes_a_ledger_url() -> None:
    assert set(_ledger_commands(cli)) <= set(COMMANDS)
