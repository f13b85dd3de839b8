"""The models of ``budgets:`` (how many model calls a policy may spend, per item, per session
or across the fleet over a window) and ``breakers:`` (repairs skipped for a while when
they stop working).

A budget counts calls the engine can see in the ledger today: ``repairs`` (each further
call a decision asks for: a repair or a retry) and ``calls`` (those, and each item's first
call when it is recorded). Tokens and cost are the ledger's to count once it records usage
per attempt: the format keeps their names free for that (``counts: tokens | cost``) and
refuses them until then.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from engine.format import fields
from engine.policy.triggers.model import AfterFailure

Duration = int | Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?[smhd]$")]
"""Seconds, or a number with a unit: ``90s``, ``5m``, ``1h``, ``1d``."""


class Budget(fields.Strict):
    """At most ``limit`` model calls of the kind ``counts`` names, per ``per``: once they
    are spent, the decision that would ask for one more takes ``action`` instead (its
    reason names the budget)."""

    counts: Literal["repairs", "calls"] = Field(
        description="`repairs`: each further call a decision asks for (a repair or a "
        "retry); `calls`: those and each item's first call. Token and cost budgets come "
        "with the usage the ledger records per attempt",
    )
    limit: int = Field(ge=0, le=1_000_000_000)
    per: Literal["item", "session", "fleet"] = Field(
        default="fleet",
        description="`item`: each run of an item; `session`: each session; `fleet`: every "
        "session of the ledger (all workers sharing it)",
    )
    window: Duration | None = Field(
        default=None,
        description="count only the calls of the last WINDOW (seconds, or 90s, 5m, 1h, 1d); "
        "none: every call of the scope",
    )
    blocks: list[fields.ContractRef] = Field(
        default_factory=list, description="the blocks whose calls count (none: every block)"
    )
    action: AfterFailure = Field(
        description="what a decision takes instead of the call the budget cannot pay for: "
        "a final action (DEGRADE, NEEDS_HUMAN, STOP or one of the pack's)"
    )
    description: str = ""


class Breaker(fields.Strict):
    """A circuit breaker on repairs: when fewer than ``min_success`` of the last ``last``
    repairs of its blocks (and failure types) gave a good output, it opens; repairs are
    then skipped for ``cooldown`` and ``action`` taken; after that one probe repair is let
    through, and its outcome closes the breaker or opens it again."""

    blocks: list[fields.ContractRef] = Field(
        default_factory=list, description="the blocks whose repairs count (none: every block)"
    )
    on: list[fields.FailureRef] = Field(
        default_factory=list,
        description="the failure types whose repairs count (none: every failure type)",
    )
    last: int = Field(default=10, ge=1, le=10_000, description="how many recent repairs count")
    min_repairs: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="the breaker opens only once this many repairs are known (default: last)",
    )
    within: Duration | None = Field(
        default=None, description="count only the repairs of this window (default: any age)"
    )
    min_success: float = Field(
        ge=0, le=1, description="the floor: the share of good repairs below which it opens"
    )
    cooldown: Duration = Field(description="how long repairs are skipped once it opens")
    action: AfterFailure = Field(
        description="what a decision takes instead of a repair while the breaker is open"
    )
    description: str = ""
