"""Executors: run the tasks (a chunk and the packs) and yield their tallies in task order,
in this process, on local processes or on a Dask cluster. ``run_chunk`` is the one pure,
picklable function every executor runs."""

from __future__ import annotations

import importlib
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from engine.backtest.judge import BlockPlan, loaded_pack
from engine.backtest.records import BacktestError, Chunk, read_chunk
from engine.backtest.tally import Tally, tally_lines
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES


@dataclass(frozen=True)
class Task:
    """One unit of work for an executor: the packs (references) and a chunk."""

    packs: tuple[str, ...]
    chunk: Chunk
    max_line_bytes: int = MAX_OUTPUT_BYTES
    """A longer record line is an invalid record, skipped without being kept."""


_PLANS: dict[tuple[str, ...], dict[str, BlockPlan]] = {}


def run_chunk(task: Task) -> Tally:
    """The tally of one chunk: the function every executor runs (pure, picklable). The
    packs and their block plans are made once per process (workers keep them)."""
    packs = [loaded_pack(ref) for ref in task.packs]
    plans = _PLANS.setdefault(task.packs, {})
    return tally_lines(packs, read_chunk(task.chunk, task.max_line_bytes), plans)


Executor = Callable[[Sequence[Task]], Iterator[Tally]]
"""Runs tasks and yields their tallies in task order."""


def run_inline(tasks: Sequence[Task]) -> Iterator[Tally]:
    for task in tasks:
        yield run_chunk(task)


def local_executor(workers: int) -> Executor:
    """Tasks on ``workers`` local processes (in this process for one)."""
    if workers <= 1:
        return run_inline

    def run(tasks: Sequence[Task]) -> Iterator[Tally]:
        context = multiprocessing.get_context("spawn" if os.name == "nt" else "fork")
        # not multiprocessing.Pool: it replaces a worker that dies (killed, out of memory)
        # and waits forever for the chunk that worker had
        pool = ProcessPoolExecutor(min(workers, len(tasks)) or 1, mp_context=context)
        try:
            yield from pool.map(run_chunk, tasks)
        except BrokenProcessPool:
            raise BacktestError(
                "a worker process ended before its chunk was done (killed, or out of memory?)"
            ) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    return run


DASK_STALLED_SECONDS = 900.0
"""A Dask backtest fails when no chunk finishes for this long (a chunk takes seconds)."""

DASK_NO_WORKERS_SECONDS = 60.0
"""... or when the cluster has had no worker for this long (a worker that cannot import
this engine leaves the cluster at its first task; Dask would wait for another forever)."""


def dask_executor(
    scheduler: str | None = None,
    workers: int = 2,
    *,
    no_workers_seconds: float = DASK_NO_WORKERS_SECONDS,
) -> Executor:
    """Tasks on a Dask cluster: the one at ``scheduler`` (its workers must import this
    engine and read the record files at the same paths), or a local cluster of
    ``workers`` processes. BacktestError when Dask is not installed, the scheduler
    cannot be reached, a chunk fails on the cluster or the cluster stops working
    (``DASK_STALLED_SECONDS``, ``no_workers_seconds``)."""
    try:
        # Any-typed on purpose: Dask is optional and ships no type information.
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise BacktestError(
            "the dask executor needs Dask: pip install 'rules-engine[dask]'"
        ) from None

    def run(tasks: Sequence[Task]) -> Iterator[Tally]:
        cluster = None
        if scheduler is None:
            cluster = distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
        try:
            try:
                client = distributed.Client(cluster or scheduler)
            except (OSError, ValueError, TypeError) as exc:  # unreachable; an odd address
                where = "local cluster" if scheduler is None else f"scheduler {scheduler}"
                raise BacktestError(
                    f"dask {where}: {exc} (is a scheduler running there? Start one with "
                    "`dask scheduler`, or leave out --scheduler for a local cluster)"
                ) from None
            with client:
                futures = client.map(run_chunk, tasks, pure=False)
                for future in futures:
                    yield _result(distributed, client, future, no_workers_seconds)
                    future.release()
        finally:
            if cluster is not None:
                cluster.close()

    return run


def _result(distributed: Any, client: Any, future: Any, no_workers_seconds: float) -> Tally:
    """A Dask future's tally, waited for in steps of a second; what failed on the cluster
    (a lost worker, a worker that cannot read a record file) as a BacktestError, and so is
    a cluster that stops working."""
    waited = without_workers = 0.0
    while True:
        try:
            tally: Tally = future.result(timeout=1)
            return tally
        except distributed.TimeoutError:
            waited += 1
            without_workers = 0 if client.scheduler_info()["workers"] else without_workers + 1
        except EngineError:
            raise
        except Exception as exc:  # raised by a worker or by Dask: any type
            raise BacktestError(
                f"dask: a chunk failed on the cluster ({type(exc).__name__}: {exc}); its "
                "workers must import this engine and read the record files at the same paths"
            ) from None
        if without_workers >= no_workers_seconds:
            raise BacktestError(
                f"dask: the cluster has had no worker for {without_workers:.0f} s (a worker "
                "that cannot import this engine leaves at its first task: see the workers' "
                "logs); start workers with `dask worker ADDRESS` where this engine is installed"
            )
        if waited >= DASK_STALLED_SECONDS:
            raise BacktestError(f"dask: no chunk finished in {waited:.0f} s; the cluster is stuck")
