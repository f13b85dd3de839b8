"""What a section of the rulepack format provides: the protocol every policy section (a
top-level key of pack.yaml such as ``triggers:`` or ``gates:``) implements, so the root model
composes sections it does not know.

A section lives in the layer that owns its behaviour (``policy/``, ``prompts/``) or outside
the engine (an entry point of group ``rules_engine.sections``); ``engine.pack.sections`` is
the registry that collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import Field

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


class Section(Protocol):
    """One top-level section of a rulepack: its model, its checks, its compiled form."""

    @property
    def key(self) -> str:
        """The section's key in pack.yaml."""
        ...

    @property
    def annotation(self) -> Any:
        """The type of the section's value (a pydantic model, or ``dict[str, Model]``...)."""
        ...

    @property
    def default(self) -> Any:
        """A ``pydantic.Field(...)`` giving the value of a pack that leaves the section out."""
        ...

    @property
    def types(self) -> Mapping[str, Any]:
        """The names the root model's annotation of this section uses (its model classes)."""
        ...

    def check(self, pack: Rulepack, checker: PackChecker) -> None:
        """Checks beyond the model's own validation; findings go to ``checker``."""
        ...

    def compile(self, pack: Rulepack, root: Path) -> Any:
        """The section ready for use at run time (None when there is nothing to compile);
        ``root`` is the folder of the pack's own pack.yaml."""
        ...


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

    @classmethod
    def mapping(
        cls,
        key: str,
        keys: Any,
        model: type[Any],
        checks: Callable[[Rulepack, PackChecker], None] | None = None,
        compiler: Callable[[Rulepack, Path], Any] | None = None,
    ) -> BuiltinSection:
        """A section whose value maps names (of type ``keys``) to ``model``s, empty when a
        pack leaves it out."""
        annotation = GenericAlias(dict, (keys, model))
        return cls(
            key, annotation, Field(default_factory=dict), {model.__name__: model}, checks, compiler
        )
