"""Findings: what `rules check` reports about a pack, and the rules they break.

A ``FindingRule`` is defined once, as a constant beside the code that emits it (the loader,
a section, a contract kind...), with what it means and how to fix it; emitters take the rule
object, so an id nobody described cannot be reported. Defining a rule registers it here;
``engine.pack.catalogue`` imports every module that defines rules and lists them
(`rules check --list-rules`, the rules of SARIF output).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.core.errors import EngineError, Position

Level = Literal["error", "warning"]

_REGISTRY: dict[str, FindingRule] = {}


@dataclass(frozen=True)
class FindingRule:
    """A kind of finding: its stable id, its level, what it means and how to fix it."""

    id: str
    description: str
    fix: str
    level: Level = "error"

    def __post_init__(self) -> None:
        known = _REGISTRY.get(self.id)
        # The same definition read twice (a plugin module imported under two names) is one rule.
        if known is not None and known != self:
            raise EngineError(f"the finding rule {self.id!r} is defined twice")
        _REGISTRY.setdefault(self.id, self)

    def at(
        self, message: str, position: Position, hint: str = "", level: Level | None = None
    ) -> Finding:
        """A finding of this rule at ``position``."""
        return Finding(self.id, message, position, hint, level or self.level)


def registered_rules() -> dict[str, FindingRule]:
    """Every rule defined by the modules imported so far, by id."""
    return dict(sorted(_REGISTRY.items()))


@dataclass(frozen=True)
class Finding:
    """One problem in a pack, at one place, with a stable rule id and a fix."""

    rule: str
    message: str
    position: Position
    hint: str = ""
    level: Level = "error"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.position.file, self.position.line, self.position.column, self.rule)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.level == "error" for f in findings)
