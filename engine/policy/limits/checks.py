"""The checks of the ``rate_limits:`` section (section.py declares it): messages, names
and windows of the limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.core.placeholders import FIGURES, FigureError, compile_figures
from engine.format.fields import ContractRef
from engine.format.findings import FindingRule
from engine.format.section import Declared, mapping, single
from engine.format.sourcemap import KeyPath
from engine.policy.limits.model import Limits, RateLimits

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


DUPLICATE_LIMIT = FindingRule(
    "duplicate-limit",
    "Two rate limits of a block have the same name.",
    "Rename one of them.",
)

INVALID_MESSAGE = FindingRule(
    "invalid-message",
    "A message uses an unknown figure or a bad format spec.",
    "Use the figures the message lists.",
)

INVALID_WINDOW = FindingRule(
    "invalid-window",
    "A rate limit's min_rounds does not fit its window.",
    "Make min_rounds at most the window's rounds.",
)


def check_rate_limits(pack: Rulepack, checker: PackChecker) -> None:
    """Limit messages name known figures with valid format specs; presentations are
    templates of purpose `presentation`."""
    for block, spec in pack.rate_limits.items():
        for index, limit in enumerate(spec.limits):
            path: KeyPath = ("rate_limits", block, "limits", index)
            for key in ("message", "recommendation"):
                try:
                    compile_figures(getattr(limit, key), FIGURES)
                except FigureError as exc:
                    checker.add(
                        INVALID_MESSAGE,
                        f"{key} of limit {limit.name!r}: {exc}",
                        (*path, key),
                        f"figures: {', '.join(sorted(FIGURES))}",
                    )
            if limit.presentation:
                checker.template_purpose(
                    limit.presentation, "presentation", (*path, "presentation")
                )
        names = [limit.name for limit in spec.limits]
        for name in sorted({n for n in names if names.count(n) > 1}):
            checker.add(
                DUPLICATE_LIMIT,
                f"limit {name!r} is declared twice for {block!r}",
                ("rate_limits", block, "limits"),
                "give each limit its own name",
            )
        if spec.window.min_rounds > spec.window.rounds:
            checker.add(
                INVALID_WINDOW,
                "min_rounds exceeds the window's rounds",
                ("rate_limits", block, "window"),
                "lower min_rounds",
            )


def declared_rate_limits() -> Declared:
    """The ``rate_limits:`` section in the root model (section.py names it)."""
    return mapping(
        ContractRef,
        RateLimits,
        check_rate_limits,
        description="per block: limits on counts in its outputs, "
        "per round and over a window of rounds",
    )


def declared_limits() -> Declared:
    """The ``limits:`` section in the root model (section.py names it)."""
    return single(Limits)
