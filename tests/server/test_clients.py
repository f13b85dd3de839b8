"""examples/clients/: the curl walkthrough, the Python (httpx) client and the Node.js script
each drive a sentinel block's repair loop against a real `rules serve` to a pass, and the
session's ledger holds both attempts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

from server_process import Server, running_server

from conftest import REPO, run_cli

CLIENTS = REPO / "examples" / "clients"

pytestmark = pytest.mark.slow


def command(name: str) -> list[str]:
    if name == "curl":
        for tool in ("bash", "curl"):
            if shutil.which(tool) is None:
                pytest.skip(f"{tool} is not installed: the curl walkthrough needs it")
        return ["bash", str(CLIENTS / "repair_loop.sh")]
    if name == "node":
        if shutil.which("node") is None:
            pytest.skip("node is not installed: the Node.js client needs Node 18 or later")
        return ["node", str(CLIENTS / "repair_loop.mjs")]
    return [sys.executable, str(CLIENTS / "repair_loop.py")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    folder = tmp_path_factory.mktemp("clients")
    with running_server(folder, "--pack", "sentinel") as running:
        yield running, folder


@pytest.mark.parametrize("client", ["curl", "python", "node"])
def test_a_client_drives_the_repair_loop_to_a_pass(
    server: tuple[Server, Path], client: str
) -> None:
    running, folder = server
    session = f"{client}-loop"
    done = subprocess.run(
        [*command(client), running.url, session],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr + running.output()
    lines = done.stdout.splitlines()
    assert lines[0] == "attempt 1: fail, action REPAIR"
    assert "attempt 2: pass, action PROCEED" in lines
    assert lines[-1] == f"PASS: session {session} repaired in 2 attempts"
    log = run_cli("log", "--session", str(folder / "sessions" / session), "--format", "jsonl")
    rows = [json.loads(line) for line in log.output.splitlines()]
    assert [(r["attempt"], r["status"], r["action"]) for r in rows] == [
        (1, "fail", "REPAIR"),
        (2, "pass", "PROCEED"),
    ]
