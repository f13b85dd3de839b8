"""A local Dask cluster started apart, as on many machines: a scheduler and two workers,
each its own process on 127.0.0.1, for the backtests that take --scheduler ADDRESS
(tests/test_backtest.py and the `rules backtest --help` example)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def dask_cluster(folder: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A Dask scheduler and two workers, each its own process (as on a cluster), quiet,
    in ``folder``; the scheduler's address. ``env``: the workers' environment."""
    info = folder / "scheduler.json"
    started: list[subprocess.Popen[bytes]] = []

    def start(module: str, *args: str, env: dict[str, str] | None = None) -> None:
        started.append(
            subprocess.Popen(
                [sys.executable, "-m", module, *args, "--no-dashboard"],
                cwd=folder,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    try:
        start(
            "distributed.cli.dask_scheduler",
            *("--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(info)),
        )
        deadline = time.monotonic() + 60
        while not (info.exists() and info.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)
        start(
            "distributed.cli.dask_worker",
            *("--scheduler-file", str(info), "--nworkers", "2", "--nthreads", "1"),
            env=env,
        )
        yield json.loads(info.read_text())["address"]
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)
