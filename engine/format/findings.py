"""Findings: what `rules check` reports about a pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.core.errors import Position

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
