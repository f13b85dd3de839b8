"""A session: evaluate, decide and record, with attempt numbers taken from the ledger.

Repeated calls for the same item (block + the parts the pack's ``session.item`` names, by
default nonce + params; or block + a name the caller gives, ``item=``) count as attempts of
that item, so caps hold across processes: read history, decide and record happen in one
write transaction. An item's attempts come in runs: a final decision (PROCEED or an
after-failure action) ends the run, and the item's next output starts a new run at
attempt 1, unless the caller continues the run (``continue_run``).
"""

from __future__ import annotations

import json
import tempfile
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.core import deadline, telemetry
from engine.core.errors import EngineError, LedgerError
from engine.core.placeholders import fill
from engine.core.textio import decode_output, holds_lone_surrogate
from engine.core.verdict import Verdict
from engine.ledger import attempts as attempt_rows
from engine.ledger import rounds as round_rows
from engine.ledger.attempts import Attempt, ItemAttempt, KeptOutput
from engine.ledger.connection import Ledger, Tx, open_ledger
from engine.ledger.store import Place, SessionLedger
from engine.ledger.url import LedgerUrl, parse_url
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.policy.calls.replies import NO_CALL, NO_USAGE, Call, Usage
from engine.policy.calls.runtime import (
    CALL_FAILURES,
    TRANSPORT_RULE,
    CompiledCalls,
    attempt_kind,
    transport_decision,
)
from engine.policy.limits.rates import Measure, Round
from engine.policy.triggers.decide import Decision
from engine.prompts.render import RenderedPrompt
from engine.session.choice_book import ChoiceBook, ensure_not_paused, round_failed
from engine.session.conflicts import ConflictBook, decision_items
from engine.session.items import item_key, sha256
from engine.session.next_prompt import render_after
from engine.session.review import Shown, opening
from engine.session.session_ref import SessionRef, item_name_problem
from engine.session.spending import (
    Recording,
    Refusal,
    admission,
    first_call_budgets,
    govern,
)
from engine.session.stream import StreamEnd
from engine.session.tracing import traced_evaluation

KEEP_OUTPUTS = "keep_outputs"


def not_text(given: OutputInput) -> str | None:
    """The first of ``given``'s nonce, model and vars the ledger cannot record as UTF-8 text
    (it holds a lone surrogate: bytes that were not UTF-8), said as a message; else None."""
    named: list[tuple[str, str | None]] = [("nonce", given.nonce), ("model", given.model)]
    for key, item in given.vars.items():
        named += [(f"vars: the key {key!r}", key), (f"vars[{key!r}]", item)]
    for where, value in named:
        if isinstance(value, str) and holds_lone_surrogate(value):
            return f"{where[:80]}: must be text (it holds a lone surrogate, not UTF-8)"
    return None


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    decision: Decision
    attempt_id: int
    user_context: str = ""
    """The user's text a choice added for this item's next prompt."""
    stderr: str | None = None
    """The tail of the model command's stderr recorded with the attempt (never prompted)."""
    review: int | None = None
    """The review this final decision opened (the pack's ``reviews.actions``), or None."""
    kind: str | None = None
    """Why the attempt's prompt was sent: first, repair, retry or transport_retry."""
    usage: Usage = NO_USAGE
    """The call's tokens as recorded (reported or estimated) and the model priced."""
    cost: float | None = None
    """What the call cost at the pack's price of its model; None without one."""


class Session:
    """Evaluations of one session, recorded in its ledger: a session folder's own ledger,
    or a session named in a ledger given by URL."""

    def __init__(
        self,
        pack: Pack,
        directory: str | Path | Place | SessionRef,
        *,
        ledger: str | Path | None = None,
        keep_outputs: bool = False,
        opened_ledger: Ledger | None = None,
    ) -> None:
        """``directory`` is the session folder (its ledger: ``directory/ledger.sqlite3``),
        or a ``SessionRef`` that names the session, its ledger and the ledger opened;
        with ``ledger`` (a path, ``sqlite:///path`` or ``postgresql://...``) the session is
        recorded there instead: in a PostgreSQL ledger ``directory`` is the session's name
        (no folder is used). ``keep_outputs`` turns on keeping evaluated outputs in the
        ledger for this session, from now on (it stays on for later calls without it); a
        pack whose ``session.keep_outputs`` is true keeps the outputs it evaluates.
        ``opened_ledger``: that ledger already open and shared by the caller (a server's
        connection pool), left open when the session closes."""
        if isinstance(directory, SessionRef):
            opened_ledger = directory.opened
        else:
            directory = SessionRef(directory, ledger)
        self.pack = pack
        self.place = directory.place()
        self.directory = self.place.folder or Path(self.place.session)
        self.ledger = SessionLedger(self.place, opened=opened_ledger)
        if keep_outputs and self.ledger.setting(KEEP_OUTPUTS) != "1":
            self.ledger.set_setting(KEEP_OUTPUTS, "1")
        self.keep_outputs = (
            keep_outputs
            or pack.model.session.keep_outputs
            or self.ledger.setting(KEEP_OUTPUTS) == "1"
        )

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, trace: object) -> None:
        self.ledger.close()

    @traced_evaluation
    def evaluate(
        self,
        given: OutputInput,
        *,
        reuse_latest: bool = False,
        run: str | None = None,
        continue_run: bool = False,
        stderr: str | None = None,
        prompt: str | None = None,
        transcript: Sequence[Shown] = (),
        admitted: bool = False,
        refused: Refusal | None = None,
        stream: StreamEnd | None = None,
        call: Call = NO_CALL,
    ) -> Outcome:
        """Evaluate ``given`` as the next attempt of its item, decide, and record both.

        The attempt is numbered in the item's run: after a final decision the next output
        starts a new run at 1; ``continue_run`` continues the item's latest run instead
        (its count and caps go on). ``stderr``: the tail of the model command's stderr,
        recorded with the attempt and returned with the outcome, never put in a prompt.
        A final decision whose action the pack's ``reviews.actions`` names opens a review
        in the same transaction, holding ``transcript`` (the run's earlier attempts as the
        caller saw them) and this output with its ``prompt``.
        ``admitted``: its call was paid for by the budgets before it was made
        (``admit_call``); ``refused``: a budget refused it, so it was never made and the
        budget's action is taken.
        ``stream``: where a streamed output stopped, and whether it was cut there.
        ``call``: the call's usage (recorded with its cost at the pack's prices) and,
        when its failure is retried at the transport, the retry: the attempt is then
        recorded with rule ``transport-retry``, spends no repair (the next attempt has
        its number) and ends nothing.

        The item is the one ``given.item`` names, else the one the pack's ``session.item``
        parts make (with ``run``, a run id, added: one run's attempts, no one else's). With
        ``reuse_latest`` an output that is the item's latest recorded attempt (the
        same text and error) is that attempt again, not a new one: `rules render` after
        `rules eval` of one output decides as eval did and records nothing."""
        block, output, item = given.block, given.output, given.item
        params = dict(given.vars)
        if item is not None and (problem := item_name_problem(item)):
            raise EngineError(f"item={item[:60]!r}: {problem}")
        if problem := not_text(given):
            raise EngineError(problem)
        context = self.with_decisions(given.context)
        choices = ChoiceBook(self.ledger)
        ensure_not_paused(choices, self.place.label)
        verdict = given.verdict(self.pack, context)
        text = decode_output(output) if output is not None else ""
        inputs = {"nonce": given.nonce, "params": params}
        key = item_key(
            {
                part: inputs[part] if part in inputs else (context or {}).get(part)
                for part in self.pack.model.session.item
            },
            name=item,
            run=run,
        )
        telemetry.set_attributes({telemetry.ITEM: item if item is not None else key})
        round_key = self.pack.model.session.round
        round_number = (context or {}).get(round_key) if round_key else None
        measure = (
            self.pack.policy.measure(block, text, context) if verdict.status != "fail" else None
        )
        grant = choices.grant(block, key)
        # a choice that granted more attempts resumes the run it was made in
        continuing = continue_run or (grant.attempts > 0 and choices.resumes(block, key))
        session = self.ledger.session
        if reuse_latest:
            history = _latest_run(self.ledger.history(block, key))
            if (
                history
                and history[-1]["output_sha256"] == sha256(text)
                and history[-1]["error"] == verdict.error
            ):
                latest = history[-1]
                return Outcome(
                    verdict,
                    given.decide(
                        self.pack,
                        verdict,
                        context,
                        attempt=latest["attempt"],
                        previous_errors=[r["error"] for r in history[:-1] if r["error"]],
                        measure=measure,
                        earlier=self._earlier_rounds(block, measure),
                        extra_attempts=grant.attempts,
                    ),
                    latest["id"],
                    grant.text,
                )

        calls: CompiledCalls = self.pack.section("model_calls")
        usage = call.usage
        if usage.model is None and given.model is not None:  # the model asked for is priced
            usage = replace(usage, model=given.model)
        # a write token, taken once before the transaction: when the connection is lost
        # after COMMIT, the retried transaction finds the committed row by it
        token = uuid.uuid4().hex
        decided: list[Decision] = []  # the decision the first run recorded
        reviewed = frozenset(self.pack.model.reviews.actions)
        kinds: list[str] = []  # the kind of attempt it recorded
        cost = calls.cost(usage)

        def record(tx: Tx) -> tuple[Decision, int, int | None]:
            if tx.retry and decided:
                done = attempt_rows.id_by_token(tx, token)
                if done is not None:
                    return decided[0], done, None
            # the item's next number first: it holds the item until this transaction ends
            run_number, number = attempt_rows.next_attempt(
                tx, session, block, key, continuing=continuing
            )
            history = attempt_rows.item_history(tx, session, block, key)
            this_run = [row for row in history if row["run"] == run_number]
            kind = attempt_kind(this_run[-1] if this_run else None)
            kinds.append(kind)
            previous = [
                row["error"] for row in this_run if row["error"] and row["rule"] != TRANSPORT_RULE
            ]
            earlier = (
                None
                if measure is None or measure.round is None
                else round_rows.counts(tx, session, block, before=measure.round)
            )
            if measure is not None and measure.round is not None:
                # this round's count replaces any earlier count of the same round
                round_rows.put_count(
                    tx, session, block, measure.round, measure.count, measure.total
                )
            transport = call.transport is not None
            if call.transport is not None:
                decision = transport_decision(
                    self.pack.policy.trigger(block).trigger,
                    verdict,
                    number,
                    call.transport,
                    call.retried,
                    calls.retry,
                )
            else:
                decision = given.decide(
                    self.pack,
                    verdict,
                    context,
                    attempt=number,
                    previous_errors=previous,
                    measure=measure,
                    earlier=earlier,
                    extra_attempts=grant.attempts,
                )
            # Budgets and breakers govern the calls the policy asks for, transport retries
            # included (a call budget counts them; no breaker judges them as repairs).
            decision = govern(
                tx,
                self.pack,
                Recording(
                    session,
                    block,
                    key,
                    run_number,
                    number,
                    verdict,
                    this_run,
                    admitted,
                    refused,
                    usage.tokens_in,
                    usage.tokens_out,
                    cost,
                ),
                decision,
                transport,
            )
            if isinstance(round_number, int) and decision.final and verdict.status == "fail":
                decision = self._round_outcome(choices, block, round_number, decision, tx)
            row = Attempt(
                pack=self.pack.name,
                status=verdict.status,
                action=decision.action,
                reason=decision.reason,
                rule=decision.rule,
                final=decision.final,
                output_sha256=sha256(text),
                output_chars=len(text),
                round=round_number if isinstance(round_number, int) else None,
                failure_type=verdict.failure_type,
                error=verdict.error,
                nonce=given.nonce,
                model=given.model,
                validation=self._validation_tier(block, verdict),
                data_summary=_summary(verdict),
                pack_version=self.pack.model.version,
                revision=self.pack.revision,
                stderr=stderr,
                streamed_chars=None if stream is None else stream.chars,
                stream_cut=None if stream is None else int(stream.cut),
                kind=kind,
                tokens_in=usage.tokens_in,
                tokens_out=usage.tokens_out,
                tokens_estimated=usage.estimated if usage.known else None,
                cost=cost,
                tokens_not_generated=None if stream is None else stream.not_generated,
                not_generated_estimated=(
                    None if stream is None or stream.not_generated is None else stream.estimated
                ),
            )
            warnings = list(verdict.warnings)
            if decision.default is not None and decision.log in ("warning", "error"):
                shown = json.dumps(decision.default, ensure_ascii=False, sort_keys=True)
                warnings.append(f"{decision.action}: {decision.reason}; continuing with {shown}")
            kept = (
                KeptOutput(text, params, context or {})
                if self.keep_outputs and output is not None
                else None
            )
            decided.append(decision)
            attempt_id = attempt_rows.insert_attempt(
                tx,
                ItemAttempt(session, block, key, row, warnings, kept),
                decision.attempt,
                token,
                run_number,
            )
            if decision.final:
                attempt_rows.end_run(tx, session, block, key)
            elif call.transport is not None:  # the retry is this attempt again
                attempt_rows.give_back(tx, session, block, key)
            review = None
            if decision.final and decision.action in reviewed:
                review = opening(
                    tx,
                    self.pack,
                    replace(given, vars=params, context=context or {}),
                    session=session,
                    item=key,
                    run=run_number,
                    attempt_id=attempt_id,
                    action=decision.action,
                    transcript=transcript,
                    current=Shown(prompt, output, verdict),
                )
            return decision, attempt_id, review

        decision, attempt_id, review = self.ledger.write(record)
        return Outcome(
            verdict,
            decision,
            attempt_id,
            grant.text,
            stderr,
            review,
            kinds[-1] if kinds else None,
            usage,
            cost,
        )

    def admit_call(self, block: str) -> Refusal | None:
        """Pay for a first call the engine is about to make from the budgets that count
        calls across items, or the budget that refuses it (``engine.session.spending``)."""
        if not first_call_budgets(self.pack, block):
            return None
        work, single = admission(self.pack, self.ledger.session, block)
        return self.ledger.write(work, single=single)

    def _round_outcome(
        self, choices: ChoiceBook, block: str, round_number: int, decision: Decision, tx: Tx
    ) -> Decision:
        """``decision`` (a final failure of ``block``), or the pack's `rounds.all_failed`
        action when every block of the round has now failed."""
        rounds = self.pack.model.rounds
        if rounds is None or rounds.all_failed is None or block not in rounds.blocks:
            return decision
        statuses = {**choices.statuses_in(tx, rounds, round_number), block: "failed"}
        if not round_failed(statuses, rounds.all_failed.statuses):
            return decision
        spec = self.pack.policy.actions[rounds.all_failed.action]
        return replace(
            decision,
            action=rounds.all_failed.action,
            reason=fill(rounds.all_failed.message, {"round": round_number}),
            rule="round:all-failed",
            final=spec.final,
            exit_code=spec.exit_code,
            template=None,
            attempts_left=0,
        )

    def _earlier_rounds(self, block: str, measure: Measure | None) -> list[Round] | None:
        """The earlier rounds' counts a rate limit's window reads, from the ledger; None
        when the output has no count for a round (the pack's history key is read then)."""
        if measure is None or measure.round is None:
            return None
        return self.ledger.round_counts(block, before=measure.round)

    def with_decisions(self, context: Mapping[str, Any] | None) -> dict[str, Any]:
        """``context`` with the pack's ``session.decided`` key filled from the ledger's
        resolved conflicts, unless the context gives it."""
        values = dict(context or {})
        key = self.pack.model.session.decided
        if key is None or key in values or self.pack.conflicts is None:
            return values

        values[key] = decision_items(ConflictBook(self.ledger), self.pack.conflicts)
        return values

    def render_prompt(
        self, verdict: Verdict, decision: Decision, given: OutputInput, user_context: str = ""
    ) -> RenderedPrompt:
        """The prompt ``decision`` calls for after ``given``, with example rounds the ledger
        accepted and the user's text a choice added for the item (``Outcome.user_context``)."""
        return render_after(self.pack, verdict, decision, given, user_context, self.place)

    def _validation_tier(self, block: str, verdict: Verdict) -> str | None:
        """Which tier of validation failed: structure, content or execution."""
        if verdict.status != "fail":
            return None
        if verdict.failure_type in CALL_FAILURES:
            return "execution"
        return self.pack.contract(block).failure_tier(verdict.failure_type or "")


def _latest_run(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The attempts of the item's latest run (``history``: all its attempts, oldest
    first)."""
    if not history:
        return history
    latest = history[-1]["run"]
    return [row for row in history if row["run"] == latest]


def _summary(verdict: Verdict) -> str | None:
    data = verdict.data
    if isinstance(data, dict) and isinstance(data.get("ids"), dict):
        return ", ".join(
            f"{len(v)} {k} id{'s' if len(v) != 1 else ''}" for k, v in data["ids"].items()
        )
    return None


_pools: dict[str, Ledger] = {}
_pools_guard = threading.Lock()


def shared_ledger(location: str, url: LedgerUrl) -> Ledger | None:
    """A PostgreSQL ledger opened once per process (its connection pool serves every
    request and thread; connecting and checking the schema per request would cost more than
    the evaluation); None for SQLite, whose connection belongs to one thread."""
    if url.backend == "sqlite":
        return None
    with _pools_guard:
        if location not in _pools:  # keyed by the URL as given (str(url) is redacted)
            _pools[location] = open_ledger(url)
        return _pools[location]


def named_session(name: str, *, ledger: str | None, sessions_dir: str) -> SessionRef:
    """A server's session ``name`` (checked by ``session_name_problem`` first): in
    ``ledger`` when the server has one (a PostgreSQL ledger's pool is shared by every
    request), else the folder ``sessions_dir/name``."""
    if ledger is None:
        return SessionRef(Path(sessions_dir) / name)
    url = parse_url(ledger)
    return SessionRef(Place(url, name, None), opened=shared_ledger(ledger, url))


def ledger_problem(ledger: str | None, sessions_dir: str) -> str | None:
    """Why sessions cannot be recorded now (the ledger unreachable, the sessions folder not
    writable), or None when they can."""
    if ledger is None:
        return sessions_writable(sessions_dir)
    try:
        open_ledger(ledger).close()
    except LedgerError as exc:
        return str(exc)
    return None


READY_SECONDS = 5.0
"""The longest a readiness probe waits for the ledger (a connection of the pool, a query)."""


def ready_problem(ledger: str | None, sessions_dir: str) -> str | None:
    """Why this process cannot record sessions now, found with what it records them with: a
    PostgreSQL ledger through the process's own pool (a probe that opened a pool of its own
    failed under load when the server's connections were all taken, and took two
    connections of the server per probe)."""
    if ledger is None:
        return sessions_writable(sessions_dir)
    try:
        url = parse_url(ledger)
        shared = shared_ledger(ledger, url)
        if shared is None:  # SQLite: a connection belongs to one thread, opened per use
            return ledger_problem(ledger, sessions_dir)
        with deadline.within(READY_SECONDS):
            shared.read(lambda tx: tx.one("SELECT 1"))
    except LedgerError as exc:
        return str(exc)
    return None


def sessions_writable(folder: str) -> str | None:
    """Why sessions cannot be recorded under ``folder``, or None when they can."""
    path = Path(folder)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".ready-"):
            pass
    except OSError as exc:
        return f"{folder}: sessions cannot be recorded here: {exc.strerror or exc}"
    return None
