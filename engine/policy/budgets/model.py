"""The models of ``budgets:`` (how many model calls a policy may spend, per item, per session
or across the fleet over a window) and ``breakers:`` (repairs skipped for a while when
they stop working).

A budget counts what the ledger records: ``repairs`` (each further call a decision asks
for: a repair or a retry), ``calls`` (those, each item's first call and each transport
retry), or the ``tokens`` (in and out) and the ``cost`` (at the pack's prices) of each
recorded attempt. A call budget pays for a call before it is made, so it is never
exceeded; tokens and cost are known only once a call returns, so a call is refused once
they are spent and a budget of them is exceeded by at most the calls in flight.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from engine.format import fields
from engine.policy.triggers.model import AfterFailure

Duration = int | Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?[smhd]$")]
"""Seconds, or a number with a unit: ``90s``, ``5m``, ``1h``, ``1d``."""


class Budget(fields.Strict):
    """At most ``limit`` model calls of the kind ``counts`` names, per ``per``: once they
    are spent, the decision that would ask for one more takes ``action`` instead (its
    reason names the budget)."""

    counts: Literal["repairs", "calls", "tokens", "cost"] = Field(
        description="`repairs`: each further call a decision asks for (a repair or a "
        "retry); `calls`: those, each item's first call and each transport retry; "
        "`tokens`: the tokens in and out of each recorded call; `cost`: its cost at the "
        "pack's `model_calls.pricing`",
    )
    limit: int | float = Field(
        ge=0,
        le=1_000_000_000_000,
        description="how many it pays for (a whole number; a cost budget takes a fraction)",
    )
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

    @model_validator(mode="after")
    def _whole(self) -> Budget:
        if self.counts != "cost" and not isinstance(self.limit, int):
            raise ValueError(
                f"limit: a budget of {self.counts} takes a whole number (only a cost "
                "budget takes a fraction)"
            )
        return self


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
