"""Rate limits: counts of pattern matches in an output, per round and over a window of rounds.

Defined once: a block's *measure* of one output is ``count`` (matches of the count pattern,
only those whose id is one of the selected context items when the pack says so) and
``total`` (the number of selected items). A limit over the ``round`` compares the count, or
count / total, with its threshold; a limit over the ``window`` sums count and total over
the last ``rounds`` rounds (earlier rounds from the ledger or the context, then this one)
and applies only when at least ``min_rounds`` rounds are known. A ratio with a total of 0
never holds. The first limit that holds decides; everything is compiled at load.
Only outputs that meet their contract are measured (a failed output is repaired first).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.patterns import CompiledPattern, compile_pattern
from engine.core.placeholders import FIGURES, Part, compile_figures, fill_figures
from engine.sandbox.environment import compile_condition

if TYPE_CHECKING:  # counting reads the models' fields; it needs no model library
    from engine.core.errors import Locate
    from engine.policy.limits.model import RateLimit, RateLimits

Round = tuple[int, int, int]
"""(round, count, total) of one round."""


@dataclass(frozen=True)
class Measure:
    """What one output counts: the round (if known), count, total and the matched items."""

    round: int | None
    count: int
    total: int
    items: tuple[Any, ...] = ()


@dataclass(frozen=True)
class LimitOutcome:
    """A limit that holds: its action, the filled message and recommendation, the figures."""

    name: str | None
    action: str
    message: str
    recommendation: str
    presentation: str | None
    figures: Mapping[str, Any]
    items: tuple[Any, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "action": self.action,
            "message": self.message,
            "recommendation": self.recommendation,
            "presentation": self.presentation,
            "figures": dict(self.figures),
            "items": list(self.items),
        }


@dataclass(frozen=True)
class CompiledLimit:
    limit: RateLimit
    message: tuple[Part, ...]
    recommendation: tuple[Part, ...]

    def holds(self, value: float) -> bool:
        threshold = self.limit.threshold
        return value > threshold if self.limit.compare == ">" else value >= threshold


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


@dataclass(frozen=True)
class CompiledRateLimits:
    """A block's rate limits, compiled: the count pattern, the item condition, the limits."""

    spec: RateLimits
    pattern: CompiledPattern
    where: Callable[..., Any] | None
    limits: tuple[CompiledLimit, ...]

    def measure(self, output: str, context: Mapping[str, Any], round_key: str | None) -> Measure:
        """Count ``output`` against the items of ``context``."""
        spec = self.spec.count
        round_value = context.get(round_key) if round_key else None
        round_number = round_value if isinstance(round_value, int) else None
        by_id: dict[str, Any] | None = None
        if spec.items is not None:
            by_id = {}
            entries = context.get(spec.items) or []
            for entry in entries if isinstance(entries, list) else []:
                if self.where is not None and not self.where(
                    **{**context, "context": context, "item": entry}
                ):
                    continue
                key = entry.get(spec.item_id) if isinstance(entry, Mapping) else entry
                if key is not None:
                    by_id.setdefault(str(key), entry)
        matched: list[Any] = []
        seen: set[str] = set()
        count = 0
        for match in self.pattern.finditer(output):
            try:
                found = match.group(spec.id_group)
            except (IndexError, ValueError):
                found = match.group(0)
            found = "" if found is None else str(found)
            if spec.distinct and found in seen:
                continue
            if by_id is not None and spec.only_items and found not in by_id:
                continue
            seen.add(found)
            count += 1
            if by_id is not None and found in by_id:
                matched.append(by_id[found])
            else:
                matched.append(found)
        total = len(by_id) if by_id is not None else 0
        return Measure(round_number, count, total, tuple(matched))

    def check(self, measure: Measure, earlier: Sequence[Round]) -> LimitOutcome | None:
        """The first limit that holds for ``measure`` (with the ``earlier`` rounds, oldest
        first, for window limits), or None."""
        window = self.spec.window
        rounds = [r for r in earlier if measure.round is None or r[0] != measure.round]
        rounds.append((measure.round or 0, measure.count, measure.total))
        recent = rounds[-window.rounds :]
        for compiled in self.limits:
            limit = compiled.limit
            if limit.over == "window":
                if len(recent) < window.min_rounds:
                    continue
                count, total = sum(r[1] for r in recent), sum(r[2] for r in recent)
                span = len(recent)
            else:
                count, total, span = measure.count, measure.total, 1
            ratio = count / total if total > 0 else None
            if limit.value == "ratio":
                if ratio is None or not compiled.holds(ratio):
                    continue
            elif not compiled.holds(count):
                continue
            figures = {
                "count": count,
                "total": total,
                "ratio": ratio,
                "threshold": _number(limit.threshold),
                "rounds": span,
                "round": measure.round,
            }
            return LimitOutcome(
                limit.name,
                limit.action,
                fill_figures(compiled.message, figures),
                fill_figures(compiled.recommendation, figures),
                limit.presentation,
                figures,
                measure.items,
            )
        return None

    def allowed(self, measure: Measure) -> LimitOutcome | None:
        """The pack's ``otherwise`` outcome (no limit holds) with the round's figures, or
        None when the pack declares none."""
        if self.spec.otherwise is None:
            return None
        ratio = measure.count / measure.total if measure.total > 0 else None
        figures = {
            "count": measure.count,
            "total": measure.total,
            "ratio": ratio,
            "threshold": None,
            "rounds": 1,
            "round": measure.round,
        }
        return LimitOutcome(
            None, self.spec.otherwise, "no rate limit holds", "", None, figures, measure.items
        )


def compile_rate_limits(
    spec: RateLimits, block: str = "", locate: Locate | None = None
) -> CompiledRateLimits:
    """Compile a block's rate limits once (pattern, condition, message templates);
    ``locate`` gives the condition's place in the pack for its errors."""
    where = locate(("rate_limits", block, "count", "where")) if locate else None
    return CompiledRateLimits(
        spec=spec,
        pattern=compile_pattern(spec.count.pattern),
        where=compile_condition(spec.count.where, where) if spec.count.where else None,
        limits=tuple(
            CompiledLimit(
                limit,
                compile_figures(limit.message, FIGURES),
                compile_figures(limit.recommendation, FIGURES),
            )
            for limit in spec.limits
        ),
    )


def rounds_from(value: Any) -> list[Round]:
    """Earlier rounds given in the context: ``[[round, count, total], ...]`` (entries of
    another shape are skipped), sorted by round."""
    out = []
    for entry in value if isinstance(value, list) else []:
        if (
            isinstance(entry, list | tuple)
            and len(entry) == 3
            and all(isinstance(x, int) and not isinstance(x, bool) for x in entry)
        ):
            out.append((entry[0], entry[1], entry[2]))
    return sorted(out, key=lambda r: r[0])
