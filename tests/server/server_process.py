"""A real `rules serve` process on a free loopback port, for the slow server tests (and
for clients and benchmarks that need one)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from conftest import script


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


@contextmanager
def running_server(
    folder: Path, *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """`rules serve ARGS` on a free loopback port (sessions under ``folder``), ready
    (`/healthz` answers); ended by its PID (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    log = folder / f"server-{port}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [
                script("rules"),
                "serve",
                "--port",
                str(port),
                "--sessions-dir",
                str(folder / "sessions"),
                *args,
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=folder,
        )
    server = Server(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"rules serve ended ({process.returncode}):\n{server.output()}"
                )
            try:
                if httpx.get(server.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"rules serve did not answer in {timeout} s:\n{server.output()}"
                )
            time.sleep(0.1)
        yield server
    finally:
        end_process(process)


def end_process(process: subprocess.Popen[bytes]) -> None:
    """End a process the tests started, by its PID: SIGTERM, then SIGKILL if it has not
    ended within 20 s."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
