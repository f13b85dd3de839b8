"""What `rules check` found in one pack."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.format.findings import Finding, has_errors

if TYPE_CHECKING:  # start-up time: the check cache reads results without YAML or pydantic
    from engine.format.loader import PackTree
    from engine.format.model import Rulepack


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
