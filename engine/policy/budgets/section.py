"""The ``budgets:`` and ``breakers:`` sections: their models in ``model.py``, their checks
in ``checks.py``, what a decision becomes when one says no in ``runtime.py``; counted in the
ledger (``engine.ledger.spending``) by the session (``engine.session.spending``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.section import BuiltinSection, Compiling
from engine.policy.budgets.runtime import (
    CompiledBreaker,
    CompiledBudget,
    compile_breakers,
    compile_budgets,
)

if TYPE_CHECKING:
    from engine.format.model import Rulepack


def _budgets(pack: Rulepack, compiling: Compiling) -> tuple[CompiledBudget, ...]:
    return compile_budgets(pack)


def _breakers(pack: Rulepack, compiling: Compiling) -> tuple[CompiledBreaker, ...]:
    return compile_breakers(pack)


BUDGETS = BuiltinSection("budgets", "engine.policy.budgets.checks:declared_budgets", _budgets)
BREAKERS = BuiltinSection("breakers", "engine.policy.budgets.checks:declared_breakers", _breakers)
