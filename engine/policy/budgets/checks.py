"""The checks of the ``budgets:`` and ``breakers:`` sections (section.py declares them): what
they take instead of a call ends the item, and a breaker can open at all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from engine.format.actions import STANDARD_ACTIONS
from engine.format.fields import Name
from engine.format.findings import FindingRule
from engine.format.section import Declared, mapping
from engine.policy.budgets.model import Breaker, Budget

if TYPE_CHECKING:
    from collections.abc import Mapping

    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker

ACTION_NOT_FINAL = FindingRule(
    "spending-action-not-final",
    "A budget or breaker takes an action that is not final: the call it saves is asked for "
    "again at once.",
    "Take a final action (DEGRADE, NEEDS_HUMAN, STOP, or one of the pack's declared final).",
)

COST_UNPRICED = FindingRule(
    "cost-budget-unpriced",
    "A budget counts cost, but the pack prices no model: every call costs nothing known, "
    "so the budget never spends.",
    "Declare `model_calls.pricing` for the models the pack's calls use, or count tokens.",
)

BREAKER_NEVER_OPENS = FindingRule(
    "breaker-never-opens",
    "A breaker needs more repairs known than it counts: it can never open.",
    "Make min_repairs at most last.",
)


def _check_final_actions(
    pack: Rulepack,
    checker: PackChecker,
    section: Literal["budgets", "breakers"],
    spenders: Mapping[str, Budget | Breaker],
    instead: str,
) -> None:
    """Each budget or breaker of ``section`` takes a final action (``instead``: of what)."""
    actions = {**STANDARD_ACTIONS, **pack.actions}
    for name, spender in spenders.items():
        action = spender.action.action
        spec = actions.get(action)  # an unknown action is its own finding
        if spec is not None and not spec.final:
            checker.add(
                ACTION_NOT_FINAL,
                f"{section[:-1]} {name!r} takes {action}, which is not final",
                (section, name, "action"),
                f"take a final action instead of {instead}",
            )


def check_budgets(pack: Rulepack, checker: PackChecker) -> None:
    _check_final_actions(
        pack, checker, "budgets", pack.budgets, "the call the budget cannot pay for"
    )
    calls = pack.model_calls
    for name, budget in pack.budgets.items():
        if budget.counts == "cost" and (calls is None or not calls.pricing):
            checker.add(
                COST_UNPRICED,
                f"budget {name!r} counts cost, but model_calls.pricing prices no model",
                ("budgets", name, "counts"),
                "price the models under model_calls.pricing, or count tokens",
            )


def check_breakers(pack: Rulepack, checker: PackChecker) -> None:
    _check_final_actions(pack, checker, "breakers", pack.breakers, "the repair the breaker skips")
    for name, breaker in pack.breakers.items():
        if breaker.min_repairs is not None and breaker.min_repairs > breaker.last:
            checker.add(
                BREAKER_NEVER_OPENS,
                f"breaker {name!r} needs {breaker.min_repairs} repairs known but counts "
                f"the last {breaker.last}",
                ("breakers", name, "min_repairs"),
                "lower min_repairs or raise last",
            )


def declared_budgets() -> Declared:
    """The ``budgets:`` section in the root model (section.py names it)."""
    return mapping(
        Name,
        Budget,
        check_budgets,
        description="model calls, tokens or cost a policy may spend, per item, per session "
        "or across the fleet over a window; counted in the ledger",
    )


def declared_breakers() -> Declared:
    """The ``breakers:`` section in the root model (section.py names it)."""
    return mapping(
        Name,
        Breaker,
        check_breakers,
        description="circuit breakers on repairs: skipped for a cooldown when too few of "
        "the recent ones worked",
    )
