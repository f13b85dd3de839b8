"""Budgets and breakers in the transaction that records an attempt.

Run by ``Session.evaluate`` after the decision is taken and before it is recorded, in the
same transaction (the item's counter row is held, and each budget's and breaker's row is
taken as it is read: ``engine.ledger.spending``), so a decision that asks for another
call is paid for, or turned into the budget's or breaker's action, exactly once across
every worker of the ledger. In order:

1. an item's first call is counted by the ``calls`` budgets that apply (it was made
   already: counted, never refused), and what the recorded call used by the budgets of
   tokens and cost;
2. a decision that asks for another call (a transport retry too) is checked against every
   budget that applies (one spent: the budget's action instead);
3. the outcome of the repair that produced this output, when the run's previous attempt
   asked for one after a failure, goes to the breakers watching it (which may open or
   close them);
4. the decision, if it still asks for a call after a failure, is checked against the
   breakers (one open: its action instead); when all let it go, each budget pays.

Every worker takes the rows in that one order (the item's counter, the budgets, then the
breakers, each in the pack's order), so two transactions never wait on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core import clock
from engine.ledger import spending as rows
from engine.ledger.spending import Scope
from engine.policy.budgets.runtime import (
    BreakerState,
    CompiledBreaker,
    CompiledBudget,
    admit,
    after_outcome,
    taken_instead,
)
from engine.policy.calls.runtime import TRANSPORT_RULE

if TYPE_CHECKING:
    from collections.abc import Sequence

    from engine.core.verdict import Verdict
    from engine.ledger.connection import Tx
    from engine.pack.compiled import Pack
    from engine.policy.triggers.decide import Decision


def now_ms() -> int:
    """The engine's clock (``engine.core.clock``: ``SOURCE_DATE_EPOCH`` fixes it) in ms."""
    return int(clock.now().timestamp() * 1000)


def budgets_of(pack: Pack) -> tuple[CompiledBudget, ...]:
    found: tuple[CompiledBudget, ...] = pack.section("budgets") or ()
    return found


def breakers_of(pack: Pack) -> tuple[CompiledBreaker, ...]:
    found: tuple[CompiledBreaker, ...] = pack.section("breakers") or ()
    return found


@dataclass(frozen=True)
class Refusal:
    """A call a budget would not pay for before it was made (``admit_first_call``): the
    budget and what it had spent."""

    budget: CompiledBudget
    spent: float

    @property
    def reason(self) -> str:
        return self.budget.spent_reason(self.spent)


@dataclass(frozen=True)
class Recording:
    """The attempt being recorded: where (session, block, item and its run), its number,
    its verdict, and the earlier attempts of its run (oldest first, as stored, transport
    retries included). ``admitted``: its call was paid for before it was made
    (``admit_first_call``); ``refused``: it was never made. ``tokens_in``, ``tokens_out``
    and ``cost``: what its call used, as recorded (None: unknown)."""

    session: str
    block: str
    item: str
    run: int
    number: int
    verdict: Verdict
    earlier: Sequence[dict[str, Any]]
    admitted: bool = False
    refused: Refusal | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: float | None = None


def refusing_first_calls(pack: Pack) -> bool:
    """Whether a budget may refuse a first call before it is made (``admit_first_call``)."""
    return any(b.budget.counts != "repairs" and b.budget.per != "item" for b in budgets_of(pack))


def admit_first_call(tx: Tx, pack: Pack, session: str, block: str) -> Refusal | None:
    """Pay for the first call of a run the engine itself is about to make (`rules run`,
    ``engine.run``) from every ``calls`` budget per session or fleet that applies, or the
    first such budget that cannot pay (nothing paid then); a budget of tokens or cost
    that is spent refuses it too. A budget per item run counts the call when it is
    recorded (the run's number is taken then)."""
    moment = now_ms()
    paying: list[tuple[Scope, int | None]] = []
    for budget in budgets_of(pack):
        spec = budget.budget
        if spec.counts == "repairs" or spec.per == "item" or not budget.applies(block):
            continue
        scope = Scope(pack.name, budget.name, budget.scope(session, block, "", 0))
        used = rows.spent(tx, scope, _since(budget, moment), budget.usage)
        if used >= spec.limit:
            return Refusal(budget, used)
        if not budget.usage:
            paying.append((scope, _since(budget, moment)))
    for scope, since in paying:
        rows.pay(tx, scope, moment, (session, block, ""), since)
    return None


def govern(
    tx: Tx, pack: Pack, at: Recording, decision: Decision, transport: bool = False
) -> Decision:
    """``decision``, or what a budget or breaker takes instead of the call it asks for.
    ``transport``: the decision resends the same prompt after a failed call (a transport
    retry): the ``calls`` budgets pay for it and those of tokens and cost may refuse it,
    but it spends no repair, and no breaker judges it or the failed call."""
    budgets, breakers = budgets_of(pack), breakers_of(pack)
    if not budgets and not breakers:
        return decision
    moment = now_ms()
    where = (at.session, at.block, at.item)
    trigger = pack.policy.trigger(at.block).trigger
    actions = pack.policy.actions
    if at.refused is not None:
        return taken_instead(
            decision,
            at.refused.budget.budget.action,
            at.refused.reason,
            f"budget:{at.refused.budget.name}",
            actions,
            trigger.after_failure,
        )
    # Rows are taken in one order by every worker (the item's counter, then budgets in the
    # pack's order, then breakers in the pack's order), so two never wait on each other.
    paying: list[tuple[Scope, int | None]] = []
    refused: Decision | None = None
    # the run's first call (a transport retry of it was paid for when it was asked)
    opening = at.number == 1 and not at.earlier
    for budget in budgets:
        if not budget.applies(at.block):
            continue
        counts = budget.budget.counts
        if budget.usage:
            made = budget.amount(at.tokens_in, at.tokens_out, at.cost)
        else:
            first = opening and counts == "calls"
            if first and at.admitted and budget.budget.per != "item":
                first = False  # paid for before it was made
            made = 1 if first else 0
        asking = not decision.final and refused is None and not (transport and counts == "repairs")
        if not made and not asking:
            continue
        scope = _scope(pack, budget, at)
        since = _since(budget, moment)
        used = rows.spent(tx, scope, since, budget.usage)
        if made:  # made already: counted, never refused
            rows.pay(tx, scope, moment, where, since, made if budget.usage else None)
            used += made
        if not asking:
            continue
        if used >= budget.budget.limit:
            refused = taken_instead(
                decision,
                budget.budget.action,
                budget.spent_reason(used),
                f"budget:{budget.name}",
                actions,
                trigger.after_failure,
            )
        elif not budget.usage:  # a call budget pays before the call is made
            paying.append((scope, since))
    if transport:
        if refused is not None:
            return refused
        for scope, since in paying:
            rows.pay(tx, scope, moment, where, since)
        return decision
    # the breakers judge repairs by their outputs: a transport retry's row is neither
    judged = [row for row in at.earlier if row["rule"] != TRANSPORT_RULE]
    previous = judged[-1] if judged else None
    repaired = previous is not None and not previous["final"] and previous["status"] == "fail"
    asks = refused is None and not decision.final and at.verdict.status == "fail"
    watching = [
        breaker
        for breaker in breakers
        if (
            repaired
            and previous is not None
            and breaker.applies(at.block, previous["failure_type"])
        )
        or (asks and breaker.applies(at.block, at.verdict.failure_type))
    ]
    # each breaker's row, taken in the pack's order before any is changed
    states = {b.name: _state(rows.breaker_state(tx, pack.name, b.name)) for b in watching}
    if repaired and previous is not None:
        success = at.verdict.status != "fail"
        for breaker in watching:
            if breaker.applies(at.block, previous["failure_type"]):
                states[breaker.name] = _outcome(
                    tx, pack.name, breaker, states[breaker.name], success, moment, at
                )
    if refused is not None:
        return refused
    if not asks:
        return decision
    for breaker in watching:
        if not breaker.applies(at.block, at.verdict.failure_type):
            continue
        state = states[breaker.name]
        allowed, changed = admit(breaker, state, moment)
        if changed != state:
            _put(tx, pack.name, breaker.name, changed)
        if not allowed:
            return taken_instead(
                decision,
                breaker.breaker.action,
                f"breaker {breaker.name!r} is open: repairs are skipped ({breaker.describe()})",
                f"breaker:{breaker.name}",
                actions,
                trigger.after_failure,
            )
    for scope, since in paying:
        rows.pay(tx, scope, moment, where, since)
    return decision


def _scope(pack: Pack, budget: CompiledBudget, at: Recording) -> Scope:
    return Scope(pack.name, budget.name, budget.scope(at.session, at.block, at.item, at.run))


def _since(budget: CompiledBudget, moment: int) -> int | None:
    return None if budget.window is None else moment - int(budget.window * 1000)


def _state(row: dict[str, Any]) -> BreakerState:
    return BreakerState(
        str(row["state"]),
        None if row["opened_at"] is None else int(row["opened_at"]),
        None if row["probe_at"] is None else int(row["probe_at"]),
        int(row["since"]),
    )


def _put(tx: Tx, pack: str, name: str, state: BreakerState) -> None:
    rows.put_breaker_state(
        tx, pack, name, state.state, state.opened_at, state.probe_at, state.since
    )


def _outcome(
    tx: Tx,
    pack: str,
    breaker: CompiledBreaker,
    state: BreakerState,
    success: bool,
    moment: int,
    at: Recording,
) -> BreakerState:
    """Keep a repair's outcome and move the breaker as it says; its state after."""
    since = state.since
    if breaker.within is not None:
        since = max(since, moment - int(breaker.within * 1000))
    where = (at.session, at.block, at.item)
    recent = rows.add_outcome(
        tx, pack, breaker.name, moment, success, where, since, breaker.breaker.last
    )
    changed = after_outcome(breaker, state, success, recent, moment)
    if changed != state:
        _put(tx, pack, breaker.name, changed)
    return changed
