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
   breakers (one open: its action instead); when all let it go, each budget pays (a
   calls budget without a window pays as it is read, and gives the call back when a
   budget or breaker refuses it: one statement where two were).

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
    from collections.abc import Callable, Sequence

    from engine.core.verdict import Verdict
    from engine.ledger.connection import Tx
    from engine.ledger.tx import Row, Statement
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


def admission(pack: Pack, session: str, block: str) -> tuple[Callable[[Tx], Refusal | None], bool]:
    """The work that pays for the first call of a run the engine is about to make
    (``admit_first_call``), and whether it is one statement (a transaction of its own:
    one round trip to a server). It is when one budget pays, of calls, without a window,
    and with a call to give: the common case."""
    counted = first_call_budgets(pack, block)
    if len(counted) == 1:
        budget = counted[0]
        spec = budget.budget
        if spec.counts == "calls" and budget.window is None and int(spec.limit) >= 1:
            scope = Scope(pack.name, budget.name, budget.scope(session, block, "", 0))

            def at_once(tx: Tx) -> Refusal | None:
                if rows.paid_if_left(tx, scope, int(spec.limit), now_ms()):
                    return None
                return Refusal(budget, rows.spent(tx, scope, None))

            return at_once, True
    return (lambda tx: admit_first_call(tx, pack, session, block)), False


def first_call_budgets(pack: Pack, block: str) -> list[CompiledBudget]:
    """The budgets that pay for (or refuse) a first call before it is made."""
    return [
        budget
        for budget in budgets_of(pack)
        if budget.budget.counts != "repairs"
        and budget.budget.per != "item"
        and budget.applies(block)
    ]


def admit_first_call(tx: Tx, pack: Pack, session: str, block: str) -> Refusal | None:
    """Pay for the first call of a run the engine itself is about to make (`rules run`,
    ``engine.run``) from every ``calls`` budget per session or fleet that applies, or the
    first such budget that cannot pay (nothing paid then); a budget of tokens or cost
    that is spent refuses it too. A budget per item run counts the call when it is
    recorded (the run's number is taken then)."""
    moment = now_ms()
    counted = [
        (budget, Scope(pack.name, budget.name, budget.scope(session, block, "", 0)))
        for budget in first_call_budgets(pack, block)
    ]
    reads = [rows.reading_spent(tx.dialect, s, _since(b, moment), b.usage) for b, s in counted]
    found = tx.batch([one for read in reads for one in read])
    paying: list[Statement] = []
    for (budget, scope), read in zip(counted, _last_of(found, reads), strict=True):
        used = rows.spent_in(read, budget.usage)
        if used >= budget.budget.limit:
            return Refusal(budget, used)
        if not budget.usage:
            since = _since(budget, moment)
            stale = rows.stale_in(read)
            paying += rows.paying(
                tx.dialect, scope, moment, (session, block, ""), since, None, stale
            )
    tx.batch(paying)
    return None


def _last_of(found: list[list[Row]], reads: list[list[Statement]]) -> list[list[Row]]:
    """The rows of the last statement of each read, from the rows of a batch that ran
    them all after ``len(found) - sum(len(r) for r in reads)`` other statements."""
    index = len(found) - sum(len(read) for read in reads)
    last = []
    for read in reads:
        index += len(read)
        last.append(found[index - 1] if read else [])
    return last


def govern(
    tx: Tx, pack: Pack, at: Recording, decision: Decision, transport: bool = False
) -> Decision:
    """``decision``, or what a budget or breaker takes instead of the call it asks for.
    ``transport``: the decision resends the same prompt after a failed call (a transport
    retry): the ``calls`` budgets pay for it and those of tokens and cost may refuse it,
    but it spends no repair, and no breaker judges it or the failed call.

    One round trip to a PostgreSQL server: one batch takes the rows (budgets, then
    breakers, each in the pack's order, so two workers never wait on each other), reads
    them and keeps a repair's outcome; what was paid and changed is written with the
    attempt's record (``Tx.later``)."""
    budgets, breakers = budgets_of(pack), breakers_of(pack)
    if not budgets and not breakers:
        return decision
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
    moment = now_ms()
    where = (at.session, at.block, at.item)
    dialect = tx.dialect
    # the budgets this attempt pays (a call made: the run's first, or what it used) or
    # that the call it asks for needs; a transport retry of the first call was paid for
    # when it was asked
    opening = at.number == 1 and not at.earlier
    counted: list[tuple[CompiledBudget, Scope, int | None, float, bool]] = []
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
        asking = not decision.final and not (transport and counts == "repairs")
        if made or asking:
            since = _since(budget, moment)
            counted.append((budget, _scope(pack, budget, at), since, made, asking))
    # the breakers judge repairs by their outputs: a transport retry's row is neither
    judged = [row for row in at.earlier if row["rule"] != TRANSPORT_RULE]
    previous = judged[-1] if judged else None
    repaired = (
        not transport
        and previous is not None
        and not previous["final"]
        and previous["status"] == "fail"
    )
    may_ask = not transport and not decision.final and at.verdict.status == "fail"
    judging = [
        breaker
        for breaker in breakers
        if repaired and previous is not None and breaker.applies(at.block, previous["failure_type"])
    ]
    watching = [
        breaker
        for breaker in breakers
        if breaker in judging or (may_ask and breaker.applies(at.block, at.verdict.failure_type))
    ]
    success = at.verdict.status != "fail"
    # a calls budget without a window that only pays for the call asked for pays as it is
    # read when it has a call left (the statement the first call was paid with): it is
    # given back should another budget or a breaker refuse the call
    # (on SQLite, where the order of statements takes no rows, they pay here: a
    # statement of their own saves a slow one to prepare, see ``paid_if_left``)
    paid_here = {
        n: rows.paid_if_left(tx, scope, int(b.budget.limit), moment)
        for n, (b, scope, since, made, asking) in enumerate(counted)
        if dialect == "sqlite" and _pays_as_read(b, since, made, asking)
    }
    reads = [
        []
        if n in paid_here
        else [rows.paying_if_left(scope, int(b.budget.limit))]
        if _pays_as_read(b, since, made, asking)
        else rows.reading_spent(dialect, scope, since, b.usage)
        for n, (b, scope, since, made, asking) in enumerate(counted)
    ]
    # every breaker's row is taken first, in the pack's order; on PostgreSQL one that
    # judges a repair reads its state again with the outcomes, in the same round trip;
    # on SQLite (no round trip to save) the outcomes are read once the state is known
    taken = [rows.taking_breaker(dialect, pack.name, b.name) for b in watching]
    sqlite = dialect == "sqlite"

    def keeping(states: dict[str, BreakerState]) -> list[list[Statement]]:
        return [
            rows.adding_outcome(
                dialect,
                pack.name,
                b.name,
                moment,
                success,
                where,
                None if b.within is None else moment - int(b.within * 1000),
                b.breaker.last,
                states[b.name].since if sqlite else None,
            )
            for b in judging
        ]

    kept = [] if sqlite else keeping({})
    found = tx.batch([*(s for read in reads for s in read), *taken, *(s for k in kept for s in k)])
    spent = _last_of(found[: sum(len(r) for r in reads)], reads)
    for n, paid_now in paid_here.items():  # as ``paying_if_left`` would have returned
        spent[n] = [(1,)] if paid_now else []
    offset = sum(len(r) for r in reads)
    states = {b.name: _state(rows.breaker_in(found[offset + n])) for n, b in enumerate(watching)}
    if sqlite and judging:
        kept = keeping(states)
        found = tx.batch([s for k in kept for s in k])
    recent = dict(zip((b.name for b in judging), _last_of(found, kept), strict=True))
    for breaker in () if sqlite else judging:
        states[breaker.name] = _state(rows.state_with_outcomes(recent[breaker.name]))
    writes: list[Statement] = []
    paying: list[Statement] = []
    paid: list[Scope] = []  # paid as read (``_pays_as_read``): given back on a refusal

    def spent_out(budget: CompiledBudget, used: float) -> Decision:
        """The budget's declared action in place of the decision: ``used`` spent of it."""
        return taken_instead(
            decision,
            budget.budget.action,
            budget.spent_reason(used),
            f"budget:{budget.name}",
            actions,
            trigger.after_failure,
        )

    refused: Decision | None = None
    for (budget, scope, since, made, asking), read in zip(counted, spent, strict=True):
        if _pays_as_read(budget, since, made, asking):
            if read:  # it had a call left: paid
                paid.append(scope)
                continue
            if refused is None:
                refused = spent_out(budget, rows.spent(tx, scope, None))
            continue
        used = rows.spent_in(read, budget.usage)
        stale = rows.stale_in(read)
        if made:  # made already: counted, never refused
            amount = made if budget.usage else None
            writes += rows.paying(dialect, scope, moment, where, since, amount, stale)
            used += made
            stale = False
        if not asking or refused is not None:
            continue
        if used >= budget.budget.limit:
            refused = spent_out(budget, used)
        elif not budget.usage:  # a call budget pays before the call is made
            paying += rows.paying(dialect, scope, moment, where, since, stale=stale)
    for breaker in judging:
        state = states[breaker.name]
        outcomes = rows.outcomes_in(recent[breaker.name])
        changed = after_outcome(breaker, state, success, outcomes, moment)
        if changed != state:
            writes.append(_put(pack.name, breaker.name, changed))
        states[breaker.name] = changed
    if refused is None and may_ask:
        for breaker in watching:
            if not breaker.applies(at.block, at.verdict.failure_type):
                continue
            state = states[breaker.name]
            allowed, changed = admit(breaker, state, moment)
            if changed != state:
                writes.append(_put(pack.name, breaker.name, changed))
            if not allowed:
                refused = taken_instead(
                    decision,
                    breaker.breaker.action,
                    f"breaker {breaker.name!r} is open: repairs are skipped ({breaker.describe()})",
                    f"breaker:{breaker.name}",
                    actions,
                    trigger.after_failure,
                )
                break
    if refused is not None:
        writes += [rows.giving_back(scope) for scope in paid]
    # nothing reads these rows before the attempt is recorded: they go with its statements
    tx.later(writes if refused is not None else writes + paying)
    return refused or decision


def _pays_as_read(budget: CompiledBudget, since: int | None, made: float, asking: bool) -> bool:
    """Whether ``budget`` pays for the call asked for in the statement that reads it
    (``paying_if_left``): a calls budget without a window, with a call to give, that
    counts no call already made."""
    return (
        asking and not made and since is None and not budget.usage and int(budget.budget.limit) >= 1
    )


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


def _put(pack: str, name: str, state: BreakerState) -> Statement:
    return rows.putting_breaker(
        pack, name, state.state, state.opened_at, state.probe_at, state.since
    )
