"""Shadow evaluation: a live output judged under a candidate pack and recorded in the
shadow ledger, and the shadow evaluations a ledger holds summed up as a backtest report
(the candidate as the pack, the live pack as the baseline), with the flips counted by the
backtest's own comparison. `rules serve --shadow` records them (``ShadowRecorder``);
`rules log --view shadow` and GET /v1/shadow read them (``recorded_shadows``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.backtest.judge import Judge, Outcome
from engine.backtest.run import Report
from engine.backtest.tally import (
    EXAMPLE_TEXT_CHARS,
    compare_outcomes,
    count_outcome,
    empty_tally,
)
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES, clean_text, decode_output, too_large_message
from engine.ledger.connection import Ledger, open_ledger
from engine.ledger.shadow import ShadowEvaluation, ShadowLog, Side, default_location
from engine.ledger.url import parse_url
from engine.pack.compiled import prepared_output
from engine.pack.inputs import OutputInput

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack
    from engine.policy.triggers.decide import Decision


@dataclass(frozen=True)
class LiveOutput:
    """An output as the live pack took it: the request's output and inputs (as sent, before
    the live pack capped and split them) and the live outcome."""

    given: OutputInput
    attempt: int
    previous_errors: tuple[str, ...]
    verdict: Verdict
    decision: Decision
    session: str = ""

    @property
    def text(self) -> str:
        output = self.given.output
        return output if isinstance(output, str) else decode_output(output or b"")


def outcome_of(verdict: Verdict, decision: Decision) -> Outcome:
    """A decision as the backtest counts it."""
    return Outcome(
        verdict.status, verdict.failure_type, decision.action, not decision.final, decision.rule
    )


def judge_candidate(
    candidate: Pack, live: LiveOutput
) -> tuple[Outcome | None, Verdict | None, str | None]:
    """``live``'s output under ``candidate``, as a backtest judges a record: the outcome
    and verdict (None: the candidate cannot evaluate or decide it) and why not. The output
    is capped at the candidate's own ``max_output_bytes``, as the live pack capped it."""
    given = live.given
    data = live.text.encode("utf-8", "surrogatepass")
    cap = candidate.model.limits.max_output_bytes or MAX_OUTPUT_BYTES
    error, failure_type = given.error, given.failure_type
    if error is None and len(data) > cap:
        data, error, failure_type = data[:cap], too_large_message(cap), "OUTPUT_TOO_LARGE"
    try:
        variables, context = candidate.split_inputs(given.block, given.context, given.vars)
        if error is not None:
            verdict: Verdict | None = candidate.verdict_for_error(given.block, error, failure_type)
        else:
            prepared = prepared_output(data, given.nonce, variables or None, shared={})
            verdict = candidate.evaluate_prepared(given.block, prepared, context or None)
    except EngineError as exc:
        return None, None, str(exc)
    record = {
        "block": given.block,
        "nonce": given.nonce,
        "context": context,
        "attempt": live.attempt,
        "previous_errors": live.previous_errors,
    }
    text = data.decode("utf-8", errors="replace")
    outcome = Judge(candidate).outcome(verdict, record, text)
    if outcome is None:
        return None, verdict, "the candidate cannot decide on this output"
    return outcome, verdict, None


def _side(outcome: Outcome, error: str | None) -> Side:
    return Side(outcome.status, outcome.failure_type, outcome.action, outcome.further, error)


class LivePack(Protocol):
    """The live pack as a shadow evaluation names it (a Pack, or its name and revision
    where the pack itself is in another process)."""

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...


def shadow_evaluation(
    pack: LivePack, candidate_ref: str, candidate: Pack, live: LiveOutput
) -> ShadowEvaluation:
    """The row recorded of ``live`` under ``candidate``; whether it flipped is the backtest's
    comparison of the candidate (the pack) with the live pack (the baseline)."""
    mine = outcome_of(live.verdict, live.decision)
    theirs, verdict, why = judge_candidate(candidate, live)
    record = {"block": live.given.block, "id": live.session or None}
    flipped = compare_outcomes(
        empty_tally(2), record, "", 1, [theirs, mine], [verdict, live.verdict]
    )
    return _row(
        pack,
        candidate_ref,
        candidate,
        live,
        candidate_side=None
        if theirs is None
        else _side(theirs, None if verdict is None else verdict.error),
        candidate_error=why,
        flipped=flipped,
        excerpt=clean_text(live.text[:EXAMPLE_TEXT_CHARS]) if flipped else None,
        session=live.session,
    )


ShadowRow = ShadowEvaluation
"""A shadow evaluation as the shadow ledger records it."""


def failed_evaluation(
    pack: LivePack, candidate_ref: str, candidate: Pack, live: LiveOutput, exc: BaseException
) -> ShadowEvaluation:
    """The row recorded of ``live`` when ``candidate`` raised ``exc`` judging it: a
    candidate that cannot evaluate the output (a flip)."""
    why = f"the candidate raised {type(exc).__name__}"
    return _row(
        pack, candidate_ref, candidate, live, candidate_side=None, candidate_error=why, flipped=True
    )


def _row(
    pack: LivePack, candidate_ref: str, candidate: Pack, live: LiveOutput, **fields: Any
) -> ShadowEvaluation:
    """The row of ``live`` under ``candidate``: the packs, the block, the live side, and
    the ``fields`` of the candidate's side."""
    return ShadowEvaluation(
        pack=pack.name,
        revision=pack.revision,
        candidate=candidate_ref,
        candidate_revision=candidate.revision,
        block=live.given.block,
        live=_side(outcome_of(live.verdict, live.decision), live.verdict.error),
        **fields,
    )


def shadow_location(ledger: str | None, sessions_dir: str) -> str | Path:
    """Where a server records shadow evaluations: ``ledger`` (its --shadow-ledger, else its
    --ledger), else ``_shadow/ledger.db`` under its ``sessions_dir``."""
    return ledger or default_location(sessions_dir)


class ShadowRecorder:
    """Shadow evaluations recorded in the ledger at ``location``, a batch per transaction;
    the ledger is opened on first use, and again after it failed."""

    def __init__(self, location: str | Path) -> None:
        self.location = location
        self.ledger: Ledger | None = None

    def check(self) -> None:
        """Open the ledger once (created, migrated): a LedgerError when it cannot."""
        open_ledger(self.location).close()

    def record(self, rows: Sequence[ShadowEvaluation]) -> None:
        """Record ``rows``; on failure the ledger is closed (and opened afresh next time)
        and the error raised."""
        try:
            if self.ledger is None:
                self.ledger = open_ledger(self.location)
            ShadowLog(self.ledger).record(list(rows))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
            self.ledger = None


class NoShadowLedger(EngineError):
    """No SQLite shadow ledger at the path given (``shown``: the path)."""

    def __init__(self, shown: str) -> None:
        super().__init__(f"{shown}: no shadow ledger here")
        self.shown = shown


def recorded_shadows(
    location: str | Path, pack: str | None = None, *, existing: bool = False
) -> list[dict[str, Any]]:
    """The shadow ledger's pairs as backtest reports (``shadow_reports``); with
    ``existing`` a SQLite ledger that is not there is a ``NoShadowLedger``, not created."""
    url = parse_url(location)
    if existing and url.path is not None and not url.path.is_file():
        raise NoShadowLedger(str(url))
    with open_ledger(url) as ledger:
        return shadow_reports(ShadowLog(ledger), str(url), pack)


class _Recorded:
    """A recorded side's verdict error, as a flip's example shows it."""

    def __init__(self, error: str | None) -> None:
        self.error = error


def _outcome(side: Side | None) -> Outcome | None:
    if side is None:
        return None
    return Outcome(side.status, side.failure_type, side.action, side.further)


def shadow_report(log: ShadowLog, pack: str, candidate: str, where: str) -> Report:
    """The pair's shadow evaluations as a backtest of ``candidate`` against ``pack`` (the
    live pack is the baseline); an example's ``where`` is ``WHERE:ROW-ID``."""
    total = empty_tally(2)
    for row in log.evaluations(pack, candidate):
        assert row.id is not None
        chunk = empty_tally(2)
        chunk.records = chunk.lines = 1
        outcomes = [_outcome(row.candidate_side), _outcome(row.live)]
        for pack_tally, outcome in zip(chunk.packs, outcomes, strict=True):
            count_outcome(pack_tally, outcome)
        side = row.candidate_side
        errors = [_Recorded(row.candidate_error if side is None else side.error)]
        errors.append(_Recorded(row.live.error))
        record = {"block": row.block, "id": row.session or None}
        compare_outcomes(chunk, record, row.excerpt or "", row.id, outcomes, errors)
        total.merge(chunk, where, 0)
    return Report(candidate, pack, total)


def shadow_reports(log: ShadowLog, where: str, pack: str | None = None) -> list[dict[str, Any]]:
    """Every (pack, candidate) pair of the ledger (only ``pack``'s when given): the names,
    the revisions seen, and the backtest report of the candidate against the live pack."""
    reports = []
    for name, candidate in log.pairs():
        if pack is not None and name != pack:
            continue
        report = shadow_report(log, name, candidate, where)
        reports.append(
            {
                "pack": name,
                "candidate": candidate,
                "revisions": log.revisions(name, candidate),
                "report": report.to_json(),
            }
        )
    return reports
