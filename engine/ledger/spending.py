"""What a fleet spends: the counts of budgets and the states of circuit breakers, shared by
every worker of a ledger.

Exact across workers: before counting a budget, a transaction takes the budget's row of
``budget_counters`` (``INSERT ... ON CONFLICT DO UPDATE``: on PostgreSQL the row stays
locked until the transaction ends; on SQLite the whole ledger is, from ``BEGIN
IMMEDIATE``), so two workers never both see the last call free. Then it counts (the
counter itself, or the ``budget_spend`` rows of the window) and, when it pays for a call,
adds its row. A transaction that fails gives its call back. A breaker's row is taken the
same way before its state is read and changed.

A budget of tokens or cost adds what each recorded call used (``amount``) instead of
counting calls.

Times are milliseconds since 1970 (``{big}`` columns), given by the caller, whose clock
(``engine.core.clock``) tests control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.ledger.attempts import now
from engine.ledger.connection import Tx


@dataclass(frozen=True)
class Scope:
    """One count of a budget: the pack and budget it belongs to and its scope key."""

    pack: str
    budget: str
    scope: str


def spent(tx: Tx, scope: Scope, since: int | None, usage: bool = False) -> float:
    """What ``scope`` has spent (since ``since`` ms when given): the calls it paid for, or
    with ``usage`` the tokens or cost its recorded calls added; its row taken first: it
    stays locked until ``tx`` ends, so the count cannot change under it."""
    # ON CONFLICT DO UPDATE reads the row's latest committed version once it holds it
    row = tx.one(
        "INSERT INTO budget_counters (pack, budget, scope, spent, ts) VALUES (?, ?, ?, 0, ?)"
        " ON CONFLICT (pack, budget, scope) DO UPDATE SET ts = excluded.ts"
        f" RETURNING {'amount' if usage else 'spent'}",
        (scope.pack, scope.budget, scope.scope, now()),
    )
    if since is not None:
        # a statement of its own: on PostgreSQL its snapshot is taken once the row is held,
        # so it sees every call paid for by the transactions that held it before
        row = tx.one(
            f"SELECT {'COALESCE(sum(amount), 0)' if usage else 'count(*)'} FROM budget_spend"
            " WHERE pack = ? AND budget = ? AND scope = ? AND at > ?",
            (scope.pack, scope.budget, scope.scope, since),
        )
    if not row:
        return 0
    return float(row[0]) if usage else int(row[0])


_BUMP = "UPDATE budget_counters SET spent = spent + 1 WHERE pack = ? AND budget = ? AND scope = ?"
_ADDS = "UPDATE budget_counters SET amount = amount + ? WHERE pack = ? AND budget = ? AND scope = ?"
_FORGET = "DELETE FROM budget_spend WHERE pack = ? AND budget = ? AND scope = ? AND at <= ?"
_ADD = (
    "INSERT INTO budget_spend (pack, budget, scope, at, session, block, item, amount)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def pay(
    tx: Tx,
    scope: Scope,
    at: int,
    where: tuple[str, str, str],
    since: int | None = None,
    amount: float | None = None,
) -> None:
    """Record one call paid for by ``scope`` at ``at`` ms (``spent`` took its row;
    ``where``: the session, block and item that spent it), or with ``amount`` the tokens
    or cost a recorded call added. A budget over a window (its start ``since``) keeps
    each call with its time and forgets those that left it."""
    key = (scope.pack, scope.budget, scope.scope)
    bump, bumped = (_BUMP, key) if amount is None else (_ADDS, (amount, *key))
    added = (*key, at, *where, 1 if amount is None else amount)
    if since is None:
        tx.execute(bump, bumped)
    elif tx.dialect == "postgresql":  # one round trip to the server
        tx.execute(
            f"WITH gone AS ({_FORGET}), bump AS ({bump}) {_ADD}",
            (*key, since, *bumped, *added),
        )
    else:
        tx.execute(_FORGET, (*key, since))
        tx.execute(bump, bumped)
        tx.execute(_ADD, added)


def spend_report(
    tx: Tx, pack: str, budget: str, scope_prefix: str, since: int | None, usage: bool = False
) -> list[tuple[str, float]]:
    """Each scope of a budget whose key starts with ``scope_prefix``, with what it spent
    (since ``since`` ms when given; with ``usage`` the tokens or cost), most spent first.
    Reads only."""
    like = scope_prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"
    if since is None:
        rows = tx.all(
            f"SELECT scope, {'amount' if usage else 'spent'} FROM budget_counters"
            " WHERE pack = ? AND budget = ? AND scope LIKE ? ESCAPE '!'",
            (pack, budget, like),
        )
    else:
        rows = tx.all(
            f"SELECT scope, {'sum(amount)' if usage else 'count(*)'} FROM budget_spend"
            " WHERE pack = ? AND budget = ? AND scope LIKE ? ESCAPE '!' AND at > ?"
            " GROUP BY scope",
            (pack, budget, like, since),
        )
    found = ((str(s), float(n) if usage else int(n)) for s, n in rows)
    return sorted(found, key=lambda r: (-r[1], r[0]))


# ------------------------------------------------------------------------------- breakers

_STATE = ("state", "opened_at", "probe_at", "since")


def breaker_state(tx: Tx, pack: str, breaker: str) -> dict[str, Any]:
    """The breaker's state (closed when never used), its row taken until ``tx`` ends."""
    row = tx.one(
        "INSERT INTO breaker_states (pack, breaker, state, opened_at, probe_at, since, ts)"
        " VALUES (?, ?, 'closed', NULL, NULL, 0, ?) ON CONFLICT (pack, breaker) DO UPDATE"
        " SET ts = breaker_states.ts RETURNING state, opened_at, probe_at, since",
        (pack, breaker, now()),
    )
    assert row is not None
    return dict(zip(_STATE, row, strict=True))


def put_breaker_state(
    tx: Tx,
    pack: str,
    breaker: str,
    state: str,
    opened_at: int | None,
    probe_at: int | None,
    since: int,
) -> None:
    tx.execute(
        "UPDATE breaker_states SET state = ?, opened_at = ?, probe_at = ?, since = ?, ts = ?"
        " WHERE pack = ? AND breaker = ?",
        (state, opened_at, probe_at, since, now(), pack, breaker),
    )


_OUTCOME = (
    "INSERT INTO breaker_outcomes (pack, breaker, at, success, session, block, item)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def add_outcome(
    tx: Tx,
    pack: str,
    breaker: str,
    at: int,
    success: bool,
    where: tuple[str, str, str],
    since: int,
    last: int,
) -> list[bool]:
    """Keep a repair's outcome (``where``: its session, block and item); the outcomes of
    the breaker's last ``last`` repairs at or after ``since`` ms, this one included,
    oldest first (``breaker_state`` took its row)."""
    added = (pack, breaker, at, int(success), *where)
    recent = (
        "SELECT id, at, success FROM breaker_outcomes WHERE pack = ? AND breaker = ? AND at >= ?"
    )
    if tx.dialect == "postgresql":  # one round trip to the server
        rows = tx.all(
            f"WITH added AS ({_OUTCOME} RETURNING id, at, success) SELECT success FROM"
            f" ({recent} UNION ALL SELECT id, at, success FROM added) o"
            " ORDER BY at DESC, id DESC LIMIT ?",
            (*added, pack, breaker, since, last),
        )
    else:
        tx.execute(_OUTCOME, added)
        rows = tx.all(
            f"SELECT success FROM ({recent}) o ORDER BY at DESC, id DESC LIMIT ?",
            (pack, breaker, since, last),
        )
    return [bool(r[0]) for r in reversed(rows)]


def outcomes(tx: Tx, pack: str, breaker: str, since: int, last: int) -> list[bool]:
    """The outcomes of the breaker's last ``last`` repairs at or after ``since`` ms, oldest
    first."""
    rows = tx.all(
        "SELECT success FROM breaker_outcomes WHERE pack = ? AND breaker = ? AND at >= ?"
        " ORDER BY at DESC, id DESC LIMIT ?",
        (pack, breaker, since, last),
    )
    return [bool(r[0]) for r in reversed(rows)]


def breaker_states(tx: Tx, pack: str) -> dict[str, dict[str, Any]]:
    """Every breaker of ``pack`` the ledger has a state for, by name. Reads only."""
    rows = tx.all(
        "SELECT breaker, state, opened_at, probe_at, since FROM breaker_states WHERE pack = ?",
        (pack,),
    )
    return {str(r[0]): dict(zip(_STATE, r[1:], strict=True)) for r in rows}
