"""The ``budgets:`` and ``breakers:`` sections: their models in ``model.py``, their checks
in ``checks.py``, what a decision becomes when one says no in ``runtime.py``; counted in the
ledger (``engine.ledger.spending``) by the session (``engine.session.spending``)."""

from __future__ import annotations

from engine.format.section import BuiltinSection

BUDGETS = BuiltinSection(
    "budgets",
    "engine.policy.budgets.checks:declared_budgets",
    "engine.policy.budgets.runtime:compile_budgets_section",
)
BREAKERS = BuiltinSection(
    "breakers",
    "engine.policy.budgets.checks:declared_breakers",
    "engine.policy.budgets.runtime:compile_breakers_section",
)
