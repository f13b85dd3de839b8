"""The engine's own sections of the rulepack format, as ``format.section.Section`` objects:
each names its key, its model, its checks and its compiler; ``engine.pack.sections`` lists
them in the order of the root's keys."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


@dataclass(frozen=True)
class BuiltinSection:
    """A section of the engine (implements ``format.section.Section``). The root model
    declares the engine's sections itself (their order and descriptions are the format's),
    so ``annotation`` and ``default`` serve only a root that lacks the key."""

    key: str
    annotation: Any
    default: Any
    types: Mapping[str, Any] = field(default_factory=dict)
    checks: Callable[[Rulepack, PackChecker], None] | None = None
    compiler: Callable[[Rulepack, Path], Any] | None = None

    def check(self, pack: Rulepack, checker: PackChecker) -> None:
        if self.checks is not None:
            self.checks(pack, checker)

    def compile(self, pack: Rulepack, root: Path) -> Any:
        return None if self.compiler is None else self.compiler(pack, root)
