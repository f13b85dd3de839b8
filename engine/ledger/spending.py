"""What a fleet spends: the counts of budgets and the states of circuit breakers, shared by
every worker of a ledger.

Exact across workers: before counting a budget, a transaction takes the budget's row of
``budget_counters`` (on PostgreSQL ``INSERT ... ON CONFLICT DO UPDATE``: the row stays
locked until the transaction ends; on SQLite the whole ledger is, from ``BEGIN
IMMEDIATE``, and the row is only read), so two workers never both see the last call
free. Then it counts (the counter itself, or the ``budget_spend`` rows of the window)
and, when it pays for a call, adds its row. A transaction that fails gives its call back.
A breaker's row is taken the same way before its state is read and changed.

The functions that build statements (``reading_spent``, ``paying``, ``taking_breaker``,
``adding_outcome``, ``putting_breaker``) let the caller send several at once
(``Tx.batch``: one round trip to a PostgreSQL server), in the order that takes the rows.

A budget of tokens or cost adds what each recorded call used (``amount``) instead of
counting calls.

Times are milliseconds since 1970 (``{big}`` columns), given by the caller, whose clock
(``engine.core.clock``) tests control.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from engine.core import clock
from engine.ledger.attempts import now
from engine.ledger.connection import Tx
from engine.ledger.tx import Row, Statement


@dataclass(frozen=True)
class Scope:
    """One count of a budget: the pack and budget it belongs to and its scope key."""

    pack: str
    budget: str
    scope: str


def reading_spent(dialect: str, scope: Scope, since: int | None, usage: bool) -> list[Statement]:
    """The statements that take ``scope``'s row and read what it has spent (since
    ``since`` ms when given): the calls it paid for, or with ``usage`` the tokens or cost
    its recorded calls added. The last one's rows give it (``spent_in``). The row stays
    locked until the transaction ends, so the count cannot change under it; on SQLite the
    transaction holds the whole ledger from ``BEGIN IMMEDIATE``: nothing is written to
    read it (``paying`` creates the row)."""
    key = (scope.pack, scope.budget, scope.scope)
    column = "amount" if usage else "spent"
    found: list[Statement] = []
    if dialect == "postgresql":
        # ON CONFLICT DO UPDATE reads the row's latest committed version once it holds it
        found.append(
            (
                "INSERT INTO budget_counters (pack, budget, scope, spent, ts)"
                " VALUES (?, ?, ?, 0, ?) ON CONFLICT (pack, budget, scope)"
                f" DO UPDATE SET ts = excluded.ts RETURNING {column}",
                (*key, now()),
            )
        )
    elif since is None:
        found.append(
            (
                f"SELECT {column} FROM budget_counters WHERE pack = ? AND budget = ? AND scope = ?",
                key,
            )
        )
    if since is not None:
        # a statement of its own: on PostgreSQL its snapshot is taken once the row is held,
        # so it sees every call paid for by the transactions that held it before
        # and how many calls left the window (``stale_in``: ``paying`` forgets them)
        kept = (
            "COALESCE(sum(amount) FILTER (WHERE at > ?), 0)"
            if usage
            else ("count(*) FILTER (WHERE at > ?)")
        )
        found.append(
            (
                f"SELECT {kept}, count(*) FILTER (WHERE at <= ?) FROM budget_spend"
                " WHERE pack = ? AND budget = ? AND scope = ?",
                (since, since, *key),
            )
        )
    return found


def spent_in(rows: list[Row], usage: bool) -> float:
    """What ``reading_spent``'s last statement read (its rows)."""
    if not rows or rows[0][0] is None:
        return 0
    return float(rows[0][0]) if usage else int(rows[0][0])


def stale_in(rows: list[Row]) -> bool:
    """Whether ``reading_spent`` found calls that left the window."""
    return bool(rows and len(rows[0]) > 1 and rows[0][1])


def spent(tx: Tx, scope: Scope, since: int | None, usage: bool = False) -> float:
    """``reading_spent`` run: what ``scope`` has spent, its row taken."""
    return spent_in(tx.batch(reading_spent(tx.dialect, scope, since, usage))[-1], usage)


def paying_if_left(scope: Scope, limit: int) -> Statement:
    """One statement that pays for a call from a budget of calls without a window when it
    has one left (``limit`` at least 1), and returns what it has then spent; no row when it
    has none left. The row is taken as it is changed, so it is its own transaction; it
    waits for the disk as every commit does: a payment lost in a crash of the database
    server would let a call budget pay for more calls than its limit."""
    return (
        "INSERT INTO budget_counters (pack, budget, scope, spent, amount, ts)"
        " VALUES (?, ?, ?, 1, 0, ?) ON CONFLICT (pack, budget, scope) DO UPDATE"
        " SET spent = budget_counters.spent + 1, ts = excluded.ts"
        " WHERE budget_counters.spent < ? RETURNING spent",
        (scope.pack, scope.budget, scope.scope, now(), limit),
    )


_PAY_LEFT = (
    "UPDATE budget_counters SET spent = spent + 1, ts = ?"
    " WHERE pack = ? AND budget = ? AND scope = ? AND spent < ?"
)
_CREATE = (
    "INSERT INTO budget_counters (pack, budget, scope, spent, amount, ts) VALUES (?, ?, ?, 1, 0, ?)"
)


_stamped: tuple[int, str] = (-1, "")


def stamp(at: int) -> str:
    """The ``ts`` text of ``at`` ms (ISO 8601 UTC with seconds, as ``now``), formatted
    once a second: formatting a time costs more than the statement it goes with."""
    global _stamped
    second, text = _stamped
    if second != at // 1000:
        second = at // 1000
        text = clock.iso(datetime.fromtimestamp(second, timezone.utc))
        _stamped = (second, text)
    return text


def paid_if_left(tx: Tx, scope: Scope, limit: int, at: int) -> bool:
    """Pay for a call from a budget of calls without a window when it has one left
    (``limit`` at least 1): whether it paid. On PostgreSQL it is ``paying_if_left``, one
    statement (a transaction of its own when it is the only one). ``at``: the time in ms
    (``engine.core.clock``), kept as the row's ``ts``. On SQLite, whose
    transaction holds the whole ledger, an UPDATE pays, and only when it changes no row
    is the row read (spent: no call left) or created: SQLite prepares a statement with
    RETURNING or ON CONFLICT several times slower than a plain UPDATE, and the engine
    prepares its statements again on each connection."""
    if tx.dialect != "sqlite":
        return tx.one(*paying_if_left(scope, limit)) is not None
    key = (scope.pack, scope.budget, scope.scope)
    ts = stamp(at)
    if tx.execute(_PAY_LEFT, (ts, *key, limit)):
        return True
    if tx.one(reading_spent("sqlite", scope, None, False)[0][0], key) is not None:
        return False
    tx.execute(_CREATE, (*key, ts))
    return True


def giving_back(scope: Scope) -> Statement:
    """The statement that gives back a call ``paying_if_left`` paid for in this
    transaction (its row held) when the call is not made after all."""
    return (
        "UPDATE budget_counters SET spent = spent - 1 WHERE pack = ? AND budget = ? AND scope = ?",
        (scope.pack, scope.budget, scope.scope),
    )


_BUMP = "UPDATE budget_counters SET spent = spent + 1 WHERE pack = ? AND budget = ? AND scope = ?"
_ADDS = "UPDATE budget_counters SET amount = amount + ? WHERE pack = ? AND budget = ? AND scope = ?"
_UPSERT = (
    "INSERT INTO budget_counters (pack, budget, scope, spent, amount, ts)"
    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (pack, budget, scope) DO UPDATE"
    " SET spent = budget_counters.spent + excluded.spent,"
    " amount = budget_counters.amount + excluded.amount"
)
_FORGET = "DELETE FROM budget_spend WHERE pack = ? AND budget = ? AND scope = ? AND at <= ?"
_ADD = (
    "INSERT INTO budget_spend (pack, budget, scope, at, session, block, item, amount)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def paying(
    dialect: str,
    scope: Scope,
    at: int,
    where: tuple[str, str, str],
    since: int | None = None,
    amount: float | None = None,
    stale: bool = True,
) -> list[Statement]:
    """The statements that record one call paid for by ``scope`` at ``at`` ms (its row
    taken by ``reading_spent``; ``where``: the session, block and item that spent it), or
    with ``amount`` the tokens or cost a recorded call added. A budget over a window (its
    start ``since``) keeps each call with its time (its counter is not used) and forgets
    those that left it (on SQLite only when ``stale``: ``stale_in`` found some)."""
    key = (scope.pack, scope.budget, scope.scope)
    if since is not None:
        added = (*key, at, *where, 1 if amount is None else amount)
        if dialect == "postgresql":  # one statement
            return [(f"WITH gone AS ({_FORGET}) {_ADD}", (*key, since, *added))]
        return [*([(_FORGET, (*key, since))] if stale else []), (_ADD, added)]
    if dialect == "sqlite":  # its row is created here (``reading_spent`` wrote nothing)
        counted = (1, 0) if amount is None else (0, amount)
        return [(_UPSERT, (*key, *counted, now()))]
    return [(_BUMP, key) if amount is None else (_ADDS, (amount, *key))]


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
_CLOSED = ("closed", None, None, 0)


def taking_breaker(dialect: str, pack: str, breaker: str) -> Statement:
    """The statement that takes the breaker's row until the transaction ends and reads
    its state (``breaker_in``). On SQLite the transaction holds the whole ledger: it
    reads without writing (``putting_breaker`` creates the row)."""
    if dialect == "sqlite":
        return (
            "SELECT state, opened_at, probe_at, since FROM breaker_states"
            " WHERE pack = ? AND breaker = ?",
            (pack, breaker),
        )
    return (
        "INSERT INTO breaker_states (pack, breaker, state, opened_at, probe_at, since, ts)"
        " VALUES (?, ?, 'closed', NULL, NULL, 0, ?) ON CONFLICT (pack, breaker) DO UPDATE"
        " SET ts = breaker_states.ts RETURNING state, opened_at, probe_at, since",
        (pack, breaker, now()),
    )


def breaker_in(rows: list[Row]) -> dict[str, Any]:
    """The state ``taking_breaker`` read (closed when never used)."""
    return dict(zip(_STATE, rows[0] if rows else _CLOSED, strict=True))


def breaker_state(tx: Tx, pack: str, breaker: str) -> dict[str, Any]:
    """``taking_breaker`` run: the breaker's state, its row taken."""
    return breaker_in(tx.batch([taking_breaker(tx.dialect, pack, breaker)])[0])


def putting_breaker(
    pack: str,
    breaker: str,
    state: str,
    opened_at: int | None,
    probe_at: int | None,
    since: int,
) -> Statement:
    """The statement that keeps a breaker's new state (its row taken by
    ``taking_breaker``)."""
    return (
        "INSERT INTO breaker_states (pack, breaker, state, opened_at, probe_at, since, ts)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pack, breaker) DO UPDATE"
        " SET state = excluded.state, opened_at = excluded.opened_at,"
        " probe_at = excluded.probe_at, since = excluded.since, ts = excluded.ts",
        (pack, breaker, state, opened_at, probe_at, since, now()),
    )


_RECENT = (
    "SELECT success FROM breaker_outcomes WHERE pack = ? AND breaker = ? AND at >= ?"
    " ORDER BY at DESC, id DESC LIMIT ?"
)
_OUTCOME = (
    "INSERT INTO breaker_outcomes (pack, breaker, at, success, session, block, item)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def adding_outcome(
    dialect: str,
    pack: str,
    breaker: str,
    at: int,
    success: bool,
    where: tuple[str, str, str],
    within: int | None,
    last: int,
    closed_since: int | None = None,
) -> list[Statement]:
    """The statements that keep a repair's outcome (``where``: its session, block and
    item) and read the breaker's state (``breaker_in``) and the outcomes of its last
    ``last`` repairs, this one included (``outcomes_in``): those since it last closed (its
    state's ``since``) and, with ``within``, at or after that ms. They run after
    ``taking_breaker`` (on PostgreSQL it holds the row). On SQLite, where the transaction
    holds the ledger, the state is the one ``taking_breaker`` read, whose ``since`` the
    caller gives (``closed_since``), and the outcomes are read alone: a statement the
    engine prepares again on each connection costs less the simpler it is."""
    added = (pack, breaker, at, int(success), *where)
    if dialect == "postgresql":  # one statement
        state = (
            "SELECT state, opened_at, probe_at, since FROM breaker_states"
            " WHERE pack = ? AND breaker = ?"
        )
        recent = (
            "SELECT id, at, success FROM breaker_outcomes WHERE pack = ? AND breaker = ? AND"
            " at >= GREATEST(?, COALESCE((SELECT since FROM breaker_states"
            " WHERE pack = ? AND breaker = ?), 0))"
        )
        floor = (pack, breaker, within or 0, pack, breaker)
        # every row: an outcome, newest first, with the state (none: never used, closed)
        shown = "SELECT o.success, s.state, s.opened_at, s.probe_at, s.since FROM"
        joined = f"LEFT JOIN ({state}) s ON 1 = 1 ORDER BY o.at DESC, o.id DESC LIMIT ?"
        return [
            (
                f"WITH added AS ({_OUTCOME} RETURNING id, at, success) {shown}"
                f" ({recent} UNION ALL SELECT id, at, success FROM added) o {joined}",
                (*added, *floor, pack, breaker, last),
            )
        ]
    assert closed_since is not None
    return [(_OUTCOME, added), (_RECENT, (pack, breaker, max(within or 0, closed_since), last))]


def outcomes_in(rows: list[Row]) -> list[bool]:
    """The outcomes ``adding_outcome`` read, oldest first."""
    return [bool(r[0]) for r in reversed(rows)]


def state_with_outcomes(rows: list[Row]) -> dict[str, Any]:
    """The breaker's state ``adding_outcome`` read (closed when never used)."""
    found = rows[0][1:] if rows and rows[0][1] is not None else _CLOSED
    return dict(zip(_STATE, found, strict=True))


def outcomes(tx: Tx, pack: str, breaker: str, since: int, last: int) -> list[bool]:
    """The outcomes of the breaker's last ``last`` repairs at or after ``since`` ms, oldest
    first."""
    return outcomes_in(tx.all(_RECENT, (pack, breaker, since, last)))


def breaker_states(tx: Tx, pack: str) -> dict[str, dict[str, Any]]:
    """Every breaker of ``pack`` the ledger has a state for, by name. Reads only."""
    rows = tx.all(
        "SELECT breaker, state, opened_at, probe_at, since FROM breaker_states WHERE pack = ?",
        (pack,),
    )
    return {str(r[0]): dict(zip(_STATE, r[1:], strict=True)) for r in rows}
