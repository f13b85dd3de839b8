"""Shadow evaluation (`--shadow NAME=CANDIDATE`): each output a served pack decides is
judged again under a candidate pack, off the live path, and recorded in the shadow ledger;
``GET /v1/shadow`` sums the records up as `rules backtest` reports.

The live path only puts the output on a bounded queue (``put_nowait``: it never waits).
One thread per process takes the outputs off, judges them (engine.backtest.shadow) and
records them a batch per transaction. A candidate that raises is recorded as one that
cannot evaluate the output; a slow one lets the queue fill, and outputs that find it full
are dropped and counted (``rules_shadow_dropped_total``), never waited for.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
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
from engine.core.errors import EngineError, LedgerError
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
from engine.server.security import require_token
from engine.server.settings import ServerSettings

log = logging.getLogger("rules.serve")

QUEUE_SIZE = 1024
"""Outputs waiting for their shadow evaluation, at most; more are dropped and counted."""

BATCH = 256
"""Shadow evaluations recorded per transaction, at most."""

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
    pack: Pack
    candidate: Candidate
    live: LiveOutput


class Shadows:
    """The candidates of a server, their queue and the thread that evaluates them."""

    def __init__(
        self, candidates: Sequence[Candidate], ledger: str, queue_size: int = QUEUE_SIZE
    ) -> None:
        self.candidates = tuple(candidates)
        self.ledger = ledger
        self.queue: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self.thread: threading.Thread | None = None

    def check_ledger(self) -> None:
        """Open the shadow ledger once (created, migrated): a LedgerError when it cannot."""
        ShadowRecorder(self.ledger).check()

    def hook(self, pack: Pack, body: OutputRequest, verdict: Verdict, decision: Decision) -> None:
        """The decision hook: queue ``body`` for each candidate of ``pack``. Never raises
        and never waits: a full queue drops the output (counted)."""
        try:
            for candidate in self.candidates:
                if candidate.name != pack.name:
                    continue
                live = LiveOutput(
                    body.given(),
                    decision.attempt,
                    tuple(getattr(body, "previous_errors", ())),
                    verdict,
                    decision,
                )
                try:
                    self.queue.put_nowait(_Job(pack, candidate, live))
                except queue.Full:
                    DROPPED.labels(pack.name).inc()
        except Exception:  # the live answer must not depend on the shadow
            log.exception("shadow evaluation: an output could not be queued")

    def start(self) -> None:
        if self.thread is None and self.candidates:
            self.thread = threading.Thread(target=self._run, name="rules-shadow", daemon=True)
            self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Record what is queued (for at most ``timeout`` seconds), then end the thread."""
        if self.thread is None:
            return
        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=timeout)
        self.thread.join(timeout)
        self.thread = None

    def wait_idle(self, timeout: float) -> bool:
        """Whether every queued output was recorded within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        recorder = ShadowRecorder(self.ledger)
        try:
            while True:
                jobs = [self.queue.get()]
                while len(jobs) < BATCH and jobs[-1] is not None:
                    try:
                        jobs.append(self.queue.get_nowait())
                    except queue.Empty:
                        break
                done = [job for job in jobs if job is not None]
                try:
                    self._record(recorder, [self._evaluate(job) for job in done], done)
                except Exception:  # the thread keeps serving the next outputs
                    log.exception("shadow evaluation: a batch of %d outputs was lost", len(done))
                    for job in done:
                        DROPPED.labels(job.pack.name).inc()
                finally:
                    for _ in jobs:
                        self.queue.task_done()
                if jobs[-1] is None:
                    return
        finally:
            recorder.close()

    def _evaluate(self, job: _Job) -> ShadowRow:
        candidate = job.candidate
        try:
            row = shadow_evaluation(job.pack, candidate.ref, candidate.pack, job.live)
        except Exception as exc:  # a candidate that raises: recorded as not evaluated
            log.warning("shadow evaluation under %s raised: %r", candidate.ref, exc)
            row = failed_evaluation(job.pack, candidate.ref, candidate.pack, job.live, exc)
        result = "error" if row.candidate_side is None else ("flipped" if row.flipped else "same")
        EVALUATED.labels(job.pack.name, candidate.ref, result).inc()
        return row

    def _record(self, recorder: ShadowRecorder, rows: list[ShadowRow], jobs: list[_Job]) -> None:
        """Record ``rows``; a ledger that fails is logged, its rows dropped and counted, and
        opened afresh for the next batch."""
        if not rows:
            return
        try:
            recorder.record(rows)
        except (LedgerError, EngineError, OSError) as exc:
            metrics.LEDGER_ERRORS.inc()
            for job in jobs:
                DROPPED.labels(job.pack.name).inc()
            log.warning("shadow ledger %s: %s; %d evaluations dropped", self.ledger, exc, len(rows))


class ShadowDocument(BaseModel):
    shadows: list[dict[str, Any]] = Field(
        description="Per served pack and candidate: `pack`, `candidate`, `revisions` (the "
        "revisions of each seen) and `report`, the `rules backtest --format json` document of "
        "the candidate (the pack) against the live pack (the baseline)."
    )


router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)], tags=["shadow"])


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
