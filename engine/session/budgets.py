"""The budgets use case (`rules budgets`, GET /v1/budgets): what a pack's budgets have
spent against their limits and where its breakers stand, as the ledger holds them now.

A fleet budget and a breaker are the ledger's (every session of it); a session budget is
the named session's; a budget per item run shows the most any item run of the session
spent and how many reached the limit. A session without a ledger yet has spent nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from engine.core import clock
from engine.ledger import spending as rows
from engine.ledger.store import LEDGER_FILE, Place, SessionLedger
from engine.ledger.tx import Tx
from engine.ledger.url import parse_url
from engine.pack.compiled import Pack
from engine.policy.budgets.runtime import (
    CLOSED,
    HALF_OPEN,
    OPEN,
    CompiledBreaker,
    CompiledBudget,
)
from engine.session.review_server import session_folders, whole_ledger
from engine.session.session_ref import SessionRef
from engine.session.spending import breakers_of, budgets_of, now_ms


@dataclass(frozen=True)
class BudgetsRequest:
    """The session whose ledger is read (its own scopes shown with the fleet's)."""

    session: SessionRef


def spending_report(pack: Pack, request: BudgetsRequest) -> dict[str, Any]:
    """Each budget's spend against its limit and each breaker's state, as data."""
    budgets, breakers = budgets_of(pack), breakers_of(pack)
    moment = now_ms()
    place = request.session.place()
    spent: dict[str, dict[str, Any]] = {}
    states: dict[str, dict[str, Any]] = {}
    if place.exists():  # opened even for a pack without any: a ledger that fails says so
        with SessionLedger(place, read_only=True, opened=request.session.opened) as ledger:

            def work(tx: Tx) -> None:
                for budget in budgets:
                    spent[budget.name] = _spent(tx, pack.name, budget, place.session, moment)
                for breaker in breakers:
                    states[breaker.name] = _state(tx, pack.name, breaker, moment)

            ledger.read(work)
    return {
        "pack": pack.name,
        "session": place.session if place.folder is None else str(place.folder),
        "at": clock.iso(clock.now()),
        "budgets": [
            _budget(b, spent.get(b.name, {"spent": 0, "items_at_limit": 0})) for b in budgets
        ],
        "breakers": [_breaker(b, states.get(b.name)) for b in breakers],
    }


def _spent(tx: Tx, pack: str, budget: CompiledBudget, session: str, moment: int) -> dict[str, Any]:
    since = None if budget.window is None else moment - int(budget.window * 1000)
    per = budget.budget.per
    if per == "fleet":
        prefix = "fleet"
    elif per == "session":
        prefix = f"session\x1f{session}"
    else:
        prefix = f"item\x1f{session}\x1f"
    found = [
        (scope, _amount(budget, n))
        for scope, n in rows.spend_report(tx, pack, budget.name, prefix, since, budget.usage)
    ]
    if per != "item":
        return {"spent": sum(n for scope, n in found if scope == prefix), "items_at_limit": None}
    limit = budget.budget.limit
    return {
        "spent": max((n for _, n in found), default=0),
        "items_at_limit": sum(1 for _, n in found if n >= limit),
    }


def _amount(budget: CompiledBudget, spent: float) -> float:
    """A count as kept: calls and tokens whole, a cost without float noise."""
    return round(spent, 9) if budget.budget.counts == "cost" else int(spent)


def _budget(budget: CompiledBudget, spent: dict[str, Any]) -> dict[str, Any]:
    spec = budget.budget
    return {
        "name": budget.name,
        "allows": budget.describe(),
        "counts": spec.counts,
        "limit": spec.limit,
        "per": spec.per,
        "window_seconds": budget.window,
        "blocks": list(spec.blocks),
        "action": spec.action.action,
        "spent": spent["spent"],
        "left": _left(spec.limit, spent["spent"]),
        "items_at_limit": spent["items_at_limit"],
    }


def _left(limit: float, spent: float) -> float:
    """What a budget has left (a cost rounded as shown: no float noise)."""
    left = max(limit - spent, 0)
    return left if isinstance(left, int) else round(left, 9)


def _state(tx: Tx, pack: str, breaker: CompiledBreaker, moment: int) -> dict[str, Any]:
    state = rows.breaker_states(tx, pack).get(breaker.name) or {
        "state": CLOSED,
        "opened_at": None,
        "probe_at": None,
        "since": 0,
    }
    since = int(state["since"])
    if breaker.within is not None:
        since = max(since, moment - int(breaker.within * 1000))
    recent = rows.outcomes(tx, pack, breaker.name, since, breaker.breaker.last)
    return {**state, "recent": recent}


def _iso(ms: int | None) -> str | None:
    return None if ms is None else clock.iso(datetime.fromtimestamp(ms / 1000, timezone.utc))


def _breaker(breaker: CompiledBreaker, state: dict[str, Any] | None) -> dict[str, Any]:
    spec = breaker.breaker
    found = state or {"state": CLOSED, "opened_at": None, "recent": []}
    recent: list[bool] = found["recent"]
    opened = found["opened_at"]
    cooldown_ends = (
        int(opened) + int(breaker.cooldown * 1000)
        if found["state"] == OPEN and opened is not None
        else None
    )
    return {
        "name": breaker.name,
        "blocks": list(spec.blocks),
        "on": list(spec.on),
        "state": found["state"],
        "opened_at": _iso(None if opened is None else int(opened)),
        "cooldown_ends": _iso(cooldown_ends),
        "recent_repairs": len(recent),
        "recent_good": sum(recent),
        "success": sum(recent) / len(recent) if recent else None,
        "min_success": spec.min_success,
        "last": spec.last,
        "action": spec.action.action,
    }


def breaker_gauges(
    packs: Iterable[Pack], ledger: str | None, sessions_dir: str
) -> dict[tuple[str, str, str], int]:
    """For ``/metrics``: how many of a server's ledgers hold each breaker of the served
    ``packs`` in each state (closed, open, half_open), by pack, breaker and state. With
    ``--ledger`` there is one ledger, shared by the fleet: 1 for the state it is in, 0 for
    the others; with session folders, each folder's ledger has breakers of its own. A
    breaker never used is closed. The ledger is read only."""
    served = [(pack.name, b.name) for pack in packs for b in breakers_of(pack)]
    counts = {
        (pack, breaker, state): 0 for pack, breaker in served for state in (CLOSED, OPEN, HALF_OPEN)
    }
    if not served:
        return counts
    names = sorted({pack for pack, _ in served})

    def tally(tx: Tx) -> None:
        states = {pack: rows.breaker_states(tx, pack) for pack in names}
        for pack, breaker in served:
            state = str(states[pack].get(breaker, {}).get("state", CLOSED))
            counts[(pack, breaker, state)] = counts.get((pack, breaker, state), 0) + 1

    if ledger is None:
        for folder in session_folders(sessions_dir):
            with Place(parse_url(folder / LEDGER_FILE), "", folder).open(read_only=True) as one:
                one.read(tally)
    else:
        with whole_ledger(ledger) as opened:
            opened.read(tally)
    return counts
