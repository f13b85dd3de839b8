"""Budgets and breakers at run time: which of them a decision meets, and what it becomes when
one of them says no. Nothing here counts: the ledger holds the counts and the breakers'
states (``engine.ledger.spending``), so that every worker sharing it sees the same; the
session's use case (``engine.session.spending``) reads and writes them in the transaction
that records the attempt.

A breaker moves between three states. *closed*: repairs go; each repair's outcome (did the
next output pass?) is kept, and when at least ``min_repairs`` of the last ``last`` are
known and fewer than ``min_success`` of them passed, it opens. *open*: repairs are skipped
(its action is taken) until ``cooldown`` has passed since it opened; then the next repair
is let through as a probe and the breaker is *half_open*. *half_open*: other repairs are
skipped while the probe is out (at most ``cooldown``: a probe whose worker died does not
hold it forever); the probe's outcome closes the breaker (success; older outcomes no
longer count) or opens it again (failure).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from engine.format.model import Rulepack
    from engine.format.section import Compiling
    from engine.format.vocabulary import ActionSpec
    from engine.policy.budgets.model import Breaker, Budget
    from engine.policy.triggers.decide import Decision
    from engine.policy.triggers.model import AfterFailure

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(value: int | str | None) -> float | None:
    """A duration of the format (seconds, or ``90s``, ``5m``, ``1h``, ``1d``) in seconds,
    whole when it is (None stays None). Here, not beside the model: deciding from a pack's
    image imports no model library."""
    if value is None or isinstance(value, int):
        return value
    found = float(value[:-1]) * UNIT_SECONDS[value[-1]]
    return int(found) if found.is_integer() else found


_PER = {"item": "per item run", "session": "per session", "fleet": "across the fleet"}


def _span(window: float) -> str:
    """A window in words: ``per hour``, ``per 90 s``."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if window == size:
            return f"per {unit}"
    return f"per {window:g} s"


@dataclass(frozen=True)
class CompiledBudget:
    """A budget ready to count: its name, its model, its window in seconds."""

    name: str
    budget: Budget
    window: float | None

    def applies(self, block: str) -> bool:
        return not self.budget.blocks or block in self.budget.blocks

    @property
    def usage(self) -> bool:
        """Whether it counts what calls used (tokens, cost), known once they return,
        rather than the calls, paid for before they are made."""
        return self.budget.counts in ("tokens", "cost")

    def amount(self, tokens_in: int | None, tokens_out: int | None, cost: float | None) -> float:
        """What a recorded call adds to it (0 for what is unknown: a model not priced)."""
        if self.budget.counts == "tokens":
            return (tokens_in or 0) + (tokens_out or 0)
        return cost or 0.0

    def scope(self, session: str, block: str, item: str, run: int) -> str:
        """The key its count is kept under: one count per item run, per session, or one
        for the fleet."""
        per = self.budget.per
        if per == "item":
            return f"item\x1f{session}\x1f{block}\x1f{item}\x1f{run}"
        if per == "session":
            return f"session\x1f{session}"
        return "fleet"

    def describe(self) -> str:
        """What it allows in words: ``40 repairs per hour across the fleet``, ``a cost of
        5 per session``."""
        spec = self.budget
        window = f" {_span(self.window)}" if self.window is not None else ""
        allows = (
            f"a cost of {shown(spec.limit)}"
            if spec.counts == "cost"
            else (f"{spec.limit} {spec.counts}")
        )
        return f"{allows}{window} {_PER[spec.per]}"

    def spent_reason(self, spent: float) -> str:
        return f"budget {self.name!r} spent: {shown(spent)} of {self.describe()}"


def shown(amount: float) -> str:
    """A count or an amount as said: whole numbers without a point, a cost to six
    significant digits."""
    if isinstance(amount, int) or float(amount).is_integer():
        return str(int(amount))
    return f"{amount:.6g}"


@dataclass(frozen=True)
class CompiledBreaker:
    """A breaker ready to judge: its name, its model, its window and cooldown in seconds."""

    name: str
    breaker: Breaker
    within: float | None
    cooldown: float

    @property
    def min_repairs(self) -> int:
        return self.breaker.min_repairs or self.breaker.last

    def applies(self, block: str, failure_type: str | None) -> bool:
        spec = self.breaker
        if spec.blocks and block not in spec.blocks:
            return False
        return not spec.on or (failure_type or "") in spec.on

    def describe(self) -> str:
        spec = self.breaker
        return (
            f"opens below {spec.min_success:.0%} good repairs of the last {spec.last}, "
            f"for {self.cooldown:g} s"
        )


@dataclass(frozen=True)
class BreakerState:
    """A breaker's state as the ledger keeps it (times in milliseconds since 1970):
    ``since``: outcomes before it no longer count (the breaker last closed then)."""

    state: str = CLOSED
    opened_at: int | None = None
    probe_at: int | None = None
    since: int = 0


def compile_budgets(pack: Rulepack) -> tuple[CompiledBudget, ...]:
    return tuple(
        CompiledBudget(name, spec, seconds(spec.window)) for name, spec in pack.budgets.items()
    )


def compile_breakers(pack: Rulepack) -> tuple[CompiledBreaker, ...]:
    return tuple(
        CompiledBreaker(name, spec, seconds(spec.within), seconds(spec.cooldown) or 0.0)
        for name, spec in pack.breakers.items()
    )


def admit(breaker: CompiledBreaker, state: BreakerState, now_ms: int) -> tuple[bool, BreakerState]:
    """Whether a repair may go now, and the breaker's state after letting it (or not)."""
    cooldown_ms = int(breaker.cooldown * 1000)
    if state.state == CLOSED:
        return True, state
    if state.state == OPEN:
        if now_ms < (state.opened_at or 0) + cooldown_ms:
            return False, state
        return True, replace(state, state=HALF_OPEN, probe_at=now_ms)
    if state.probe_at is not None and now_ms < state.probe_at + cooldown_ms:
        return False, state  # the probe is out
    return True, replace(state, probe_at=now_ms)


def after_outcome(
    breaker: CompiledBreaker,
    state: BreakerState,
    success: bool,
    recent: Sequence[bool],
    now_ms: int,
) -> BreakerState:
    """The breaker's state after a repair's outcome: ``recent`` holds the outcomes that
    count (this one included), newest last."""
    if state.state == HALF_OPEN:
        if success:
            return BreakerState(CLOSED, None, None, now_ms)
        return replace(state, state=OPEN, opened_at=now_ms, probe_at=None)
    if state.state == OPEN:
        return state  # a repair let through before it opened: its outcome is kept only
    last = list(recent)[-breaker.breaker.last :]
    if len(last) >= breaker.min_repairs and sum(last) / len(last) < breaker.breaker.min_success:
        return replace(state, state=OPEN, opened_at=now_ms, probe_at=None)
    return state


def taken_instead(
    decision: Decision,
    ending: AfterFailure,
    reason: str,
    rule: str,
    actions: Mapping[str, ActionSpec],
    after_failure: AfterFailure | None,
) -> Decision:
    """``decision`` (which asked for another call) turned into ``ending``'s action, for
    ``reason``. Without a default of its own, an ending with the block's after-failure
    action takes that policy's default, template and log."""
    spec = actions[ending.action]
    source: Any = ending
    if (
        ending.default is None
        and after_failure is not None
        and after_failure.action == ending.action
    ):
        source = after_failure
    if ending.reason:
        reason = f"{ending.reason} ({reason})"
    return replace(
        decision,
        action=ending.action,
        reason=reason,
        rule=rule,
        final=spec.final,
        exit_code=spec.exit_code,
        attempts_left=0 if spec.final else decision.attempts_left,
        template=source.template,
        default=source.default,
        log=source.log,
    )


def compile_budgets_section(pack: Rulepack, compiling: Compiling) -> tuple[CompiledBudget, ...]:
    """The ``budgets:`` section compiled (``engine.policy.budgets.section``)."""
    return compile_budgets(pack)


def compile_breakers_section(pack: Rulepack, compiling: Compiling) -> tuple[CompiledBreaker, ...]:
    """The ``breakers:`` section compiled (``engine.policy.budgets.section``)."""
    return compile_breakers(pack)
