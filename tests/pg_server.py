"""A real PostgreSQL server for tests and benchmarks, started here from the server binaries.

``initdb`` and ``pg_ctl`` are looked up on PATH, then in ``/usr/lib/postgresql/*/bin``
(Debian's ``postgresql`` package). The server gets a data folder in a new temporary
folder, listens on a free port of 127.0.0.1 only (its unix socket in that folder), and runs
as an unprivileged user when this process is root (PostgreSQL refuses root): ``nobody``,
through ``setpriv`` (else ``runuser``), owning the folder. It is stopped by its PID.
Password authentication over TCP, so a URL here carries a real password (``PASSWORD``).

The fixtures: ``postgres_server`` (one per test process, started when first asked for) and
``ledger_url``, a fresh ledger on each backend (``sqlite``, ``postgresql``): the same tests
run on both. Without server binaries the PostgreSQL cases skip, saying why.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

USER = "rules"
PASSWORD = "s3cr3t-pw-Zq9"  # a throwaway server's: tests check it is never printed
UNPRIVILEGED = "nobody"


def find_binary(name: str) -> str | None:
    """``name`` (initdb, pg_ctl) on PATH, else the newest /usr/lib/postgresql/*/bin one."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return candidates[-1] if candidates else None


def missing_reason() -> str | None:
    """Why no server can be started here, or None."""
    absent = [n for n in ("initdb", "pg_ctl") if find_binary(n) is None]
    if absent:
        return (
            f"no PostgreSQL server binaries ({', '.join(absent)} not on PATH nor in "
            "/usr/lib/postgresql/*/bin): install Debian's postgresql package"
        )
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return "psycopg is not installed: pip install -e '.[dev,postgres]'"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """A running server: ``url(dbname)``, ``create_database()``, ``restart()``, ``stop()``."""

    _names = itertools.count(1)

    def __init__(self, options: tuple[str, ...] = ()) -> None:
        reason = missing_reason()
        if reason:
            raise RuntimeError(reason)
        self.initdb, self.pg_ctl = find_binary("initdb"), find_binary("pg_ctl")
        # /tmp, not a pytest folder: the unprivileged user must reach it
        self.folder = Path(tempfile.mkdtemp(prefix="rules-pg-"))
        self.data = self.folder / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = (
                ["setpriv", f"--reuid={UNPRIVILEGED}", "--regid=nogroup", "--clear-groups", "--"]
                if shutil.which("setpriv")
                else ["runuser", "-u", UNPRIVILEGED, "--"]
            )
        (self.folder / "pw").write_text(PASSWORD + "\n", encoding="utf-8")
        if self.as_user:
            shutil.chown(self.folder, UNPRIVILEGED)
            shutil.chown(self.folder / "pw", UNPRIVILEGED)
        self._run(
            self.initdb,
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={self.folder / 'pw'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.options = (
            "-c listen_addresses=127.0.0.1",
            f"-c unix_socket_directories={self.folder}",
            "-c shared_buffers=32MB",
            "-c max_connections=200",
            *options,
        )
        self.port = 0
        for _ in range(5):  # a port found free may be taken before the server binds it
            self.port = _free_port()
            try:
                self._pg_ctl("start")
                break
            except subprocess.CalledProcessError:
                continue
        else:
            raise RuntimeError(f"the PostgreSQL server did not start: see {self.folder}/log")

    def _run(self, *command: str | None) -> None:
        subprocess.run(
            [*self.as_user, *(str(c) for c in command)],
            check=True,
            capture_output=True,
            cwd=self.folder,
            timeout=120,
        )

    def _pg_ctl(self, action: str) -> None:
        options = " ".join((f"-p {self.port}", *self.options))
        args = ["-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-t", "60"]
        if action == "restart":
            args += ["-m", "fast"]
        self._run(self.pg_ctl, *args, "-o", options, action)

    @property
    def pid(self) -> int:
        """The postmaster's PID (the first line of postmaster.pid)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def url(self, dbname: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        name = f"ledger_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def restart(self) -> None:
        """``pg_ctl restart`` (fast: open connections are cut)."""
        self._pg_ctl("restart")

    def frozen_for(self, seconds: float) -> None:
        """Stop every process of the server (SIGSTOP: the postmaster and its backends, by
        their PIDs) for ``seconds``, then let them go on (SIGCONT): a database that stops
        answering, with its connections open, and then carries on with what it was sent."""
        postmaster = self.pid
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
        pids = [postmaster, *(int(child) for child in children)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        """Stop the server by its PID (SIGINT: fast shutdown), then remove its folder."""
        try:
            pid = self.pid
        except (OSError, ValueError, IndexError):
            pid = 0
        if pid:
            try:
                os.kill(pid, signal.SIGINT)
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    os.kill(pid, 0)
                    time.sleep(0.05)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test process (skips where none can be started)."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    server = PostgresServer(("-c fsync=off", "-c synchronous_commit=off"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh ledger location on each backend: a file, or a new database on the server."""
    if request.param == "sqlite":
        (tmp_path / "ledger").mkdir()  # outside the working folder: never created silently
        return str(tmp_path / "ledger" / "ledger.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


@pytest.fixture
def session_backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The backend a test module's session commands record on (a module opts in with
    ``pytestmark = pytest.mark.usefixtures("session_backend")``): each session folder's own
    SQLite ledger; with ``RULES_TEST_LEDGER=postgresql`` (a run of its own in CI) one new
    PostgreSQL database per test, named by ``RULES_LEDGER``, where each ``--session`` is a
    session's name. A test of what only a folder has (its files) is marked ``folder_ledger``
    and skipped there."""
    backend = os.environ.get("RULES_TEST_LEDGER", "sqlite")
    if backend == "postgresql":
        if request.node.get_closest_marker("folder_ledger") is not None:
            pytest.skip("checks what only a session folder's own ledger has")
        server: PostgresServer = request.getfixturevalue("postgres_server")
        monkeypatch.setenv("RULES_LEDGER", server.create_database())
    yield backend
