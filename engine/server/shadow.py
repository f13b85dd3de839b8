"""Shadow evaluation (`--shadow NAME=CANDIDATE`): each output a served pack decides is
judged again under a candidate pack, off the live path, and recorded in the shadow ledger;
``GET /v1/shadow`` sums the records up as `rules backtest` reports.

The live path only puts the output on a bounded queue (``put_nowait``: it never waits).
A process of its own per worker (``Shadows``) takes the outputs off, judges them
(engine.backtest.shadow) and records them a batch per transaction: a slow candidate uses
that process's interpreter and CPU, not the live one's (judged in a thread of the worker,
it took the GIL from the live answers: p99 4.7 times worse). A candidate that raises is
recorded as one that cannot evaluate the output; a slow one lets the queue fill, and
outputs that find it full are dropped and counted (``rules_shadow_dropped_total``), never
waited for.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Query, Request
from prometheus_client import Counter
from pydantic import BaseModel, Field

from engine.backtest.shadow import (
    LiveOutput,
    ShadowRecorder,
    ShadowRow,
    failed_evaluation,
    recorded_shadows,
    shadow_evaluation,
    shadow_location,
)
from engine.core.errors import LedgerError
from engine.core.verdict import Verdict
from engine.pack.compiled import Pack
from engine.policy.triggers.decide import Decision
from engine.server import metrics
from engine.server.limits import within_time
from engine.server.models import OutputRequest
from engine.server.packs import PackSet, load_pack_set
from engine.server.problems import (
    LEDGER_UNAVAILABLE,
    TIMEOUT,
    UNAUTHORIZED,
    Problem,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import api_router
from engine.server.settings import ServerSettings

log = logging.getLogger("rules.serve")

QUEUE_SIZE = 1024
"""Outputs waiting for their shadow evaluation, at most; more are dropped and counted."""

BATCH = 256
"""Shadow evaluations recorded per transaction, at most."""

NICENESS = 10
"""How much lower the shadow process's CPU priority is than its worker's: on a busy machine
the live answers get the CPU first, and a candidate that cannot keep up drops outputs."""

EVALUATED = Counter(
    "rules_shadow_evaluations_total",
    "Outputs evaluated under a candidate pack, by pack, candidate and result "
    "(same, flipped, error: the candidate could not evaluate it)",
    ["pack", "candidate", "result"],
)
DROPPED = Counter(
    "rules_shadow_dropped_total",
    "Outputs not shadow-evaluated: the queue was full (a slow candidate) or the shadow "
    "ledger failed",
    ["pack"],
)


class ShadowError(ValueError):
    """A --shadow that cannot run: its form, or a NAME no served pack has."""


def parse_shadow(text: str) -> tuple[str, str]:
    """``NAME=CANDIDATE`` as (NAME, CANDIDATE)."""
    name, sep, candidate = text.partition("=")
    if not sep or not name.strip() or not candidate.strip():
        raise ShadowError(
            f"--shadow {text!r}: expected NAME=CANDIDATE (a served pack's name, then a pack: "
            "builtin name, folder or file)"
        )
    return name.strip(), candidate.strip()


def default_ledger(settings: ServerSettings) -> str:
    """Where shadow evaluations are recorded: ``--shadow-ledger``, else the server's
    ``--ledger``, else ``_shadow/ledger.db`` under ``--sessions-dir``."""
    return str(shadow_location(settings.shadow_ledger or settings.ledger, settings.sessions_dir))


@dataclass(frozen=True)
class Candidate:
    """A candidate pack shadowing the served pack ``name``."""

    name: str
    ref: str
    pack: Pack


def load_candidates(
    pairs: Sequence[tuple[str, str]], served: PackSet, locked: bool | None = None
) -> tuple[Candidate, ...]:
    """Each candidate loaded and checked like a served pack (``PackLoadFailed`` with its
    findings); a ShadowError when NAME is not served."""
    candidates = []
    for name, ref in pairs:
        if served.get(name) is None:
            known = ", ".join(sorted(served.packs)) or "none"
            raise ShadowError(f"--shadow {name}={ref}: no pack {name!r} is served ({known})")
        loaded = load_pack_set([ref], locked)
        candidates.append(Candidate(name, ref, next(iter(loaded.packs.values()))))
    return tuple(candidates)


@dataclass(frozen=True)
class _Job:
    """One output to judge under candidate number ``candidate``, sent to the shadow process
    (pickled: the live pack by its name and revision, which a reload may change)."""

    pack: str
    revision: str
    candidate: int
    live: LiveOutput


@dataclass(frozen=True)
class _Live:
    """The live pack as a shadow evaluation records it."""

    name: str
    revision: str


class Shadows:
    """The candidates of a server, and the process that judges outputs under them.

    The candidates run in a process of their own, forked from the server's worker when it
    starts serving (so it holds the candidates as loaded and checked there): a slow
    candidate takes that process's interpreter, never the live one's. The live path only
    hands the output to a bounded queue (``put_nowait``); a thread of the worker takes back
    what the shadow process reports (evaluations done, batches dropped) for the metrics.
    Where processes cannot be forked, a thread of the worker judges them instead."""

    def __init__(
        self, candidates: Sequence[Candidate], ledger: str, queue_size: int = QUEUE_SIZE
    ) -> None:
        self.candidates = tuple(candidates)
        self.ledger = ledger
        self.queue_size = queue_size
        self.context: Any = (
            multiprocessing.get_context("fork")
            if "fork" in multiprocessing.get_all_start_methods()
            else None
        )
        self.queue: Any = None
        self.results: Any = None
        self.process: Any = None
        self.threads: list[threading.Thread] = []
        self.sent = 0
        self.done = 0
        self.counts = threading.Lock()

    def check_ledger(self) -> None:
        """Open the shadow ledger once (created, migrated): a LedgerError when it cannot."""
        ShadowRecorder(self.ledger).check()

    def hook(self, pack: Pack, body: OutputRequest, verdict: Verdict, decision: Decision) -> None:
        """The decision hook: queue ``body`` for each candidate of ``pack``. Never raises
        and never waits: a full queue drops the output (counted)."""
        if self.queue is None:
            return
        try:
            for number, candidate in enumerate(self.candidates):
                if candidate.name != pack.name:
                    continue
                live = LiveOutput(
                    body.given(),
                    decision.attempt,
                    tuple(getattr(body, "previous_errors", ())),
                    verdict,
                    decision,
                )
                with self.counts:
                    try:
                        self.queue.put_nowait(_Job(pack.name, pack.revision, number, live))
                        self.sent += 1
                    except queue.Full:
                        DROPPED.labels(pack.name).inc()
        except Exception:  # the live answer must not depend on the shadow
            log.exception("shadow evaluation: an output could not be queued")

    def start(self) -> None:
        if self.queue is not None or not self.candidates:
            return
        if self.context is None:  # no fork here: judged by a thread of this process
            self.queue = queue.Queue(maxsize=self.queue_size)
            self.results = queue.Queue()
            judge = threading.Thread(
                target=judge_outputs,
                args=(self.candidates, self.ledger, self.queue, self.results, None),
                name="rules-shadow",
                daemon=True,
            )
            self.threads.append(judge)
            judge.start()
        else:
            self.queue = self.context.Queue(maxsize=self.queue_size)
            self.results = self.context.SimpleQueue()
            self.process = self.context.Process(
                target=judge_outputs,
                args=(self.candidates, self.ledger, self.queue, self.results, os.getpid()),
                name="rules-shadow",
                daemon=True,
            )
            self.process.start()
        collector = threading.Thread(target=self._collect, name="rules-shadow-results", daemon=True)
        self.threads.append(collector)
        collector.start()

    def _collect(self) -> None:
        """Count what the shadow process reports, until it reports its end (None)."""
        while True:
            reported = self.results.get()
            if reported is None:
                return
            for pack, ref, result in reported:
                if result == "dropped":
                    DROPPED.labels(pack).inc()
                else:
                    EVALUATED.labels(pack, ref, result).inc()
            with self.counts:
                self.done += len(reported)

    def stop(self, timeout: float = 10.0) -> None:
        """Record what is queued (for at most ``timeout`` seconds), then end the shadow
        process and the threads."""
        if self.queue is None:
            return
        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=timeout)
        if self.process is not None:
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.terminate()  # its own, by the object that started it
                self.process.join(timeout)
            self.queue.cancel_join_thread()  # exit never waits on a feeder thread
            self.results.put(None)  # ends the collector, should the process have been killed
        for thread in self.threads:
            thread.join(timeout)
        self.queue = self.process = None
        self.threads = []

    def wait_idle(self, timeout: float) -> bool:
        """Whether every queued output was judged and recorded (or dropped) within
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with self.counts:
                if self.done >= self.sent:
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def judge_outputs(
    candidates: Sequence[Candidate], location: str, jobs: Any, results: Any, parent: int | None
) -> None:
    """The shadow process: judge each job under its candidate and record a batch per
    transaction, reporting ``(pack, candidate, result)`` of each; end at None, or when the
    worker that started it is gone (``parent``: its process id)."""
    if parent is not None:
        # forked from a worker that was serving: its signal handlers and the event loop's
        # wake-up pipe are the worker's, not this process's
        with contextlib.suppress(ValueError):  # not the main thread: none was set
            signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the worker decides when it ends
        with contextlib.suppress(OSError, AttributeError):  # no nice() on Windows
            os.nice(NICENESS)
    recorder = ShadowRecorder(location)
    try:
        while True:
            try:
                first = jobs.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and os.getppid() != parent:
                    return  # the worker was killed: nothing more will come
                continue
            batch = [first]
            while len(batch) < BATCH and batch[-1] is not None:
                try:
                    batch.append(jobs.get_nowait())
                except queue.Empty:
                    break
            done = [job for job in batch if job is not None]
            rows = [_evaluate(candidates, job) for job in done]
            recorded = _record(recorder, rows)
            results.put(
                [(row.pack, row.candidate, _result(row) if recorded else "dropped") for row in rows]
            )
            if batch[-1] is None:
                return
    finally:
        recorder.close()
        results.put(None)  # the worker's collector ends


def _result(row: ShadowRow) -> str:
    return "error" if row.candidate_side is None else ("flipped" if row.flipped else "same")


def _evaluate(candidates: Sequence[Candidate], job: _Job) -> ShadowRow:
    candidate = candidates[job.candidate]
    live = _Live(job.pack, job.revision)
    try:
        return shadow_evaluation(live, candidate.ref, candidate.pack, job.live)
    except Exception as exc:  # a candidate that raises: recorded as not evaluated
        log.warning("shadow evaluation under %s raised: %r", candidate.ref, exc)
        return failed_evaluation(live, candidate.ref, candidate.pack, job.live, exc)


def _record(recorder: ShadowRecorder, rows: list[ShadowRow]) -> bool:
    """Record ``rows``; a ledger that fails is logged and its rows dropped (the recorder
    opens it afresh for the next batch)."""
    if not rows:
        return True
    try:
        recorder.record(rows)
        return True
    except Exception as exc:  # the shadow process keeps judging the next outputs
        log.warning(
            "shadow ledger %s: %s; %d evaluations dropped", recorder.location, exc, len(rows)
        )
        return False


class ShadowDocument(BaseModel):
    shadows: list[dict[str, Any]] = Field(
        description="Per served pack and candidate: `pack`, `candidate`, `revisions` (the "
        "revisions of each seen) and `report`, the `rules backtest --format json` document of "
        "the candidate (the pack) against the live pack (the baseline)."
    )


router = api_router("shadow")


def summary(location: str | None, pack: str | None) -> dict[str, Any]:
    """The shadow ledger's pairs as backtest reports (none without a shadow ledger)."""
    if location is None:
        return {"shadows": []}
    try:
        return {"shadows": recorded_shadows(location, pack)}
    except LedgerError as exc:
        metrics.LEDGER_ERRORS.inc()
        raise Problem(LEDGER_UNAVAILABLE, str(exc)) from None


@router.get(
    "/shadow",
    summary="The candidate packs' would-be flips, as `rules backtest` reports",
    responses=route_responses(ShadowDocument, UNAUTHORIZED, LEDGER_UNAVAILABLE, TIMEOUT),
)
async def shadow_summary(
    request: Request,
    pack: str | None = Query(None, description="Only the candidates of this served pack."),
) -> Document:
    shadows: Shadows | None = request.app.state.shadows
    location = None if shadows is None else shadows.ledger
    document = await within_time(request.app.state.settings.timeout, summary, location, pack)
    return Document(document)
