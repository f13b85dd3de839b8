"""Findings: what `rules check` reports about a pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from engine.errors import Position

if TYPE_CHECKING:
    from engine.format.loader import PackTree
    from engine.format.model import Rulepack

Level = Literal["error", "warning"]


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


@dataclass
class CheckResult:
    """What `rules check` found in one pack (``model`` and ``tree`` when it was loaded
    now, not taken from the check cache)."""

    target: str
    findings: list[Finding]
    name: str | None = None
    model: Rulepack | None = None
    tree: PackTree | None = None
    version: str | None = None

    @property
    def ok(self) -> bool:
        return not has_errors(self.findings)
