"""Deciding what happens next: trigger tables, guards, attempt caps, after-failure policies.

Counting, defined once: the output being evaluated is *attempt* k, where the original output
is attempt 1 and each repair or retry adds one. A pack's trigger key ``max_attempts`` is the
number of repairs/retries allowed after the original (what a pack author writes); everything
the engine puts out (the decision, the terminal, templates, guards, `rules explain`) counts
outputs instead: a decision's ``max_attempts`` is the outputs the item may have in all, the
trigger's key plus one, so a decision on attempt k may ask for another one while
k < max_attempts; ``attempts_left`` is how many repairs/retries remain after this decision.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from engine.core.lazy import BuiltOnUse
from engine.format.actions import STANDARD_ACTIONS
from engine.policy.limits.rates import (
    CompiledRateLimits,
    Measure,
    Round,
    compile_rate_limits,
    rounds_from,
)
from engine.sandbox.environment import compile_condition

if TYPE_CHECKING:  # deciding reads the models' fields; it needs no model library
    from collections.abc import Callable, Mapping, Sequence

    from engine.core.errors import Locate
    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.vocabulary import ActionSpec
    from engine.policy.triggers.model import AfterFailure, AttemptPolicy, Trigger


@dataclass(frozen=True)
class Decision:
    """What to do with an output: the action, why, and what carries into the next attempt."""

    action: str
    reason: str
    attempt: int
    max_attempts: int
    """The outputs the item may have in all, the original included (the trigger's
    ``max_attempts`` plus one): "attempt 1 of 2" on the terminal is attempt=1,
    max_attempts=2."""
    attempts_left: int
    final: bool
    exit_code: int
    rule: str = ""
    template: str | None = None
    hint: bool = True
    default: Any = None
    log: str = "none"
    carry: dict[str, Any] = field(default_factory=dict)
    limit: dict[str, Any] | None = None
    """The rate limit that decided (name, action, message, recommendation, presentation,
    figures, items); None when no limit holds."""

    def to_json(self) -> dict[str, Any]:
        out = {
            "action": self.action,
            "reason": self.reason,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "attempts_left": self.attempts_left,
            "final": self.final,
            "exit_code": self.exit_code,
            "rule": self.rule,
            "template": self.template,
            "default": self.default,
            "log": self.log,
            "carry": dict(self.carry),
        }
        if self.limit is not None:
            out["limit"] = dict(self.limit)
        return out


def _policy(trigger: Trigger, attempt: int) -> AttemptPolicy | None:
    """The trigger's policy of the next attempt (attempt + 1); None: the trigger's defaults."""
    for policy in trigger.attempts:
        if policy.attempt == attempt:
            return policy
    return None


@dataclass(frozen=True)
class CompiledGuard:
    """A guard whose condition is compiled: ``holds(**variables)`` is truthy when it applies."""

    name: str
    reason: str
    holds: Callable[..., Any]


@dataclass(frozen=True)
class CompiledTrigger:
    """A block's trigger row with its guards compiled."""

    trigger: Trigger
    guards: tuple[CompiledGuard, ...]


def compile_trigger(
    trigger: Trigger, block: str = "", locate: Locate | None = None
) -> CompiledTrigger:
    """The trigger row with each guard's condition compiled (``locate``: where the pack
    declares it, for the errors of a guard that fails as it runs)."""
    return CompiledTrigger(
        trigger,
        tuple(
            CompiledGuard(
                guard.name,
                guard.reason,
                compile_condition(
                    guard.when,
                    locate(("triggers", block, "skip_when", index, "when")) if locate else None,
                ),
            )
            for index, guard in enumerate(trigger.skip_when)
        ),
    )


@dataclass(frozen=True)
class CompiledPolicy:
    """A pack's trigger tables and actions, ready to decide: nothing is compiled per call."""

    actions: Mapping[str, ActionSpec]
    triggers: Mapping[str, CompiledTrigger]
    rate_limits: Mapping[str, CompiledRateLimits] = field(default_factory=dict)
    round_key: str | None = None
    history_key: str | None = None
    not_retriable: frozenset[str] = frozenset()

    @cached_property
    def no_trigger(self) -> CompiledTrigger:
        """The trigger row of a block the pack gives none: the defaults of ``Trigger``."""
        # Deferred: a pack read back from its image decides without pydantic until a block
        # without a trigger row is decided; 0.34 s (python -X importtime).
        from engine.policy.triggers.model import Trigger

        return compile_trigger(Trigger())

    def measure(self, block: str, output: str, context: Mapping[str, Any] | None) -> Measure | None:
        """What ``output`` counts for the block's rate limits; None without limits."""
        limits = self.rate_limits.get(block)
        if limits is None:
            return None
        return limits.measure(output, context or {}, self.round_key)

    def trigger(self, block: str) -> CompiledTrigger:
        """The block's trigger row; a block without one gets the defaults."""
        compiled = self.triggers.get(block)
        return compiled if compiled is not None else self.no_trigger

    def decision_key(
        self,
        verdict: Verdict,
        attempt: int,
        previous_errors: Sequence[str] = (),
        *,
        output: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> tuple[str, str, int, int, bool] | None:
        """What ``decide`` on ``verdict`` at ``attempt`` after ``previous_errors`` depends on
        (called with the same ``output`` and ``context``, without extra attempts, measure
        or earlier rounds): the block, the failure type, the attempt, which of the
        trigger's guards holds first (-1: none) and whether the error repeats the last one
        (``stop_on_repeat``). Equal keys, equal decisions but for ``carry``; the guards are
        run here, which costs a fraction of deciding. None when the decision reads more: a
        passing output of a block with rate limits (its counts), or a failure with guards
        when ``output`` is not given."""
        block = verdict.block
        if verdict.status != "fail":
            return None if block in self.rate_limits else (block, "", attempt, -1, False)
        failure_type = verdict.failure_type
        if not failure_type:
            return None
        compiled = self.trigger(block)
        trigger = compiled.trigger
        if failure_type not in trigger.on or failure_type in self.not_retriable:
            return (block, failure_type, attempt, -1, False)
        guard = -1
        if compiled.guards:
            if output is None:
                return None
            variables = guard_variables(
                verdict, output, attempt, trigger.max_attempts, previous_errors, context
            )
            guard = first_guard(compiled, variables)
        return (block, failure_type, attempt, guard, _repeats(trigger, previous_errors, verdict))


def _repeats(trigger: Trigger, previous_errors: Sequence[str], verdict: Verdict) -> bool:
    """``stop_on_repeat`` applies: the error is the last of the previous ones."""
    return bool(
        trigger.stop_on_repeat and previous_errors and previous_errors[-1] == (verdict.error or "")
    )


def guard_variables(
    verdict: Verdict,
    output: str,
    attempt: int,
    cap: int,
    previous_errors: Sequence[str],
    context: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The variables a trigger's guards see (the context's keys also at the top level)."""
    values = dict(context or {})
    return {
        "output": output,
        "error": verdict.error or "",
        "failure_type": verdict.failure_type or "",
        "failures": [f.to_json() for f in verdict.failures],
        "attempt": attempt,
        "max_attempts": cap + 1,  # outputs in all, as templates and the terminal count
        "block": verdict.block,
        "previous_errors": list(previous_errors),
        "status": verdict.status,
        "warnings": verdict.warnings,
        "data": verdict.data,
        "context": values,
        **values,
    }


def first_guard(compiled: CompiledTrigger, variables: Mapping[str, Any]) -> int:
    """The index of the first of the trigger's guards that holds; -1 when none does."""
    for index, guard in enumerate(compiled.guards):
        if guard.holds(**variables):
            return index
    return -1


def compile_policy(
    pack: Rulepack, locate: Locate | None = None, *, lazy: bool = False
) -> CompiledPolicy:
    """Compile every guard and rate limit of ``pack`` once (``locate``: positions in the
    pack's files): now, or with ``lazy`` those of a block when it is first decided."""
    triggers = pack.triggers
    limits = pack.rate_limits
    compiled_triggers = BuiltOnUse(
        triggers, lambda block: compile_trigger(triggers[block], block, locate)
    )
    compiled_limits = BuiltOnUse(
        limits, lambda block: compile_rate_limits(limits[block], block, locate)
    )
    if not lazy:
        compiled_triggers.build_all()
        compiled_limits.build_all()
    return CompiledPolicy(
        actions={**STANDARD_ACTIONS, **pack.actions},
        triggers=compiled_triggers,
        rate_limits=compiled_limits,
        round_key=pack.session.round,
        history_key=pack.session.history,
        not_retriable=frozenset(
            name for name, spec in pack.failure_types.items() if not spec.retriable
        ),
    )


def decide(
    policy: CompiledPolicy | Rulepack,
    verdict: Verdict,
    *,
    output: str,
    attempt: int = 1,
    previous_errors: Sequence[str] = (),
    carry: Mapping[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
    measure: Measure | None = None,
    earlier: Sequence[Round] | None = None,
    extra_attempts: int = 0,
) -> Decision:
    """Decide on ``verdict`` for attempt ``attempt`` of block ``verdict.block``.

    ``extra_attempts``: repairs/retries allowed beyond the trigger's ``max_attempts`` (a
    user's choice granted them).

    An output that meets its contract is checked against the block's rate limits: the
    first limit that holds gives the decision its action (engine.policy.limits.rates).
    ``measure`` is the output's count when the caller has it already; ``earlier`` the
    earlier rounds' counts (a ledger's), else those of the pack's history context key.

    ``policy`` is normally compiled once (``Pack`` does); a ``Rulepack`` is compiled here,
    on every call, which suits one-off use only.
    """
    if not isinstance(policy, CompiledPolicy):
        policy = compile_policy(policy)
    actions = policy.actions
    compiled = policy.trigger(verdict.block)
    trigger = compiled.trigger
    cap = trigger.max_attempts + extra_attempts
    carried = dict(carry or {})

    def make(
        action: str,
        reason: str,
        rule: str,
        *,
        ending: AfterFailure | None = None,
        template: str | None = None,
        hint: bool = True,
        limit: dict[str, Any] | None = None,
    ) -> Decision:
        """The decision to take ``action``: ``ending`` is the after-failure policy that
        ends the item (its template, default and log); else ``template`` and ``hint`` are
        those of the next attempt."""
        spec = actions[action]
        if ending is not None and ending.reason and ending.action == action:
            # The pack's own words first (`after_failure.reason`), then what led there.
            reason = f"{ending.reason} ({reason})"
        return Decision(
            action=action,
            reason=reason,
            attempt=attempt,
            max_attempts=cap + 1,  # outputs in all, as the terminal and templates count
            attempts_left=0 if spec.final else cap - attempt,
            final=spec.final,
            exit_code=spec.exit_code,
            rule=rule,
            template=ending.template if ending else template,
            hint=hint,
            default=ending.default if ending else None,
            log=ending.log if ending else "none",
            carry=carried,
            limit=limit,
        )

    if verdict.status != "fail":
        limits = policy.rate_limits.get(verdict.block)
        if limits is not None:
            values = dict(context or {})
            measured = measure or limits.measure(output, values, policy.round_key)
            if earlier is None:
                earlier = rounds_from(values.get(policy.history_key or ""))
            outcome = limits.check(measured, earlier)
            if outcome is not None:
                return make(
                    outcome.action,
                    outcome.message,
                    f"limit:{outcome.name}",
                    limit=outcome.to_json(),
                )
            allowed = limits.allowed(measured)
            if allowed is not None:
                return make(
                    "PROCEED", "the output meets its contract", "pass", limit=allowed.to_json()
                )
        return make("PROCEED", "the output meets its contract", "pass")
    final = trigger.after_failure
    after = final.action
    failure_type = verdict.failure_type or ""
    if failure_type in policy.not_retriable:
        # no retry can fix it: the error goes back to the user; the after-failure template
        # and menu are for retries that ran out (seed 003 §8)
        reason, rule = f"{failure_type} is not retriable", "not-retriable"
        fatal = trigger.on_not_retriable
        if fatal is not None:
            return make(fatal.action, reason, rule, ending=fatal)
        decision = make(after, reason, rule, ending=final)
        return replace(decision, template=None)  # the after-failure's default and log only
    if failure_type not in trigger.on:
        return make(
            after,
            f"{failure_type} does not trigger a repair for {verdict.block}",
            "no-trigger",
            ending=final,
        )
    if compiled.guards:
        variables = guard_variables(verdict, output, attempt, cap, previous_errors, context)
        holding = first_guard(compiled, variables)
        if holding >= 0:
            guard = compiled.guards[holding]
            reason = guard.reason or f"guard {guard.name!r} holds"
            return make(after, reason, f"guard:{guard.name}", ending=final)
    if _repeats(trigger, previous_errors, verdict):
        return make(after, "the same error repeated", "repeat", ending=final)
    if attempt > cap:
        return make(
            after,
            f"{cap} repair attempt{'s' if cap != 1 else ''} used",
            "exhausted",
            ending=final,
        )
    step = _policy(trigger, attempt)
    return make(
        step.action if step else trigger.action,
        f"{failure_type}: the next output is attempt {attempt + 1} of {cap + 1}",
        f"attempt:{attempt}",
        template=step.template if step else trigger.template,
        hint=step.hint if step else True,
    )
