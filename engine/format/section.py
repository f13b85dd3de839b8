"""What a section of the rulepack format provides: the protocol every section (a top-level
key of pack.yaml such as ``triggers:`` or ``gates:``) implements, so the root model is
composed of sections it does not know.

A section lives in the layer that owns its behaviour (``policy/``, ``prompts/``,
``contracts/``, the format's own vocabulary here) or outside the engine (an entry point of
group ``rules_engine.sections``); ``engine.pack.sections`` holds the one table of the
engine's sections and the registry of the others.

A section of the engine is light to import: it names the function that declares its model
and checks (``"engine.policy.gates.checks:declared"``), and that module (pydantic, every
model, Jinja2's analysis) is imported when the root model is composed or a pack checked,
never when a pack read back from its image (engine.pack.image) is compiled for `rules
eval`. This is the engine's one lazy boundary between running a compiled pack and
validating one: the declarations of all sections cost 0.3 s (measured with
``python -X importtime``, see ``BuiltinSection.declared``), `rules eval` from an image
0.13 s in all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from engine.core.errors import Position
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


class Compiling:
    """What a section is compiled with, besides the validated pack (a plain class: the
    module is on the start-up path of every command, and a dataclass costs more to define).
    """

    __slots__ = ("folder_of", "lazy", "locate", "root", "section")

    def __init__(
        self,
        root: Path,
        folder_of: Callable[[KeyPath], Path],
        locate: Callable[[KeyPath], Position],
        lazy: bool,
        section: Callable[[str], Any],
    ) -> None:
        self.root = root
        """The folder of the pack's own pack.yaml."""
        self.folder_of = folder_of
        """The folder of the pack file that declared a key path (``extends`` merges packs
        of several folders; a file a pack names is relative to the pack that names it)."""
        self.locate = locate
        """Where a key path was written (for errors a compiled section raises later)."""
        self.lazy = lazy
        """Compile what the section holds when it is first used, not now (a command that
        evaluates or renders one output)."""
        self.section = section
        """The compiled form of another section (gates render with the pack's templates)."""


class Section(Protocol):
    """One top-level section of a rulepack: its model, its checks, its compiled form and the
    variables the templates of its purposes see."""

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
        """Names a string annotation of the section uses (its model classes)."""
        ...

    def check(self, pack: Rulepack, checker: PackChecker) -> None:
        """Checks beyond the model's own validation; findings go to ``checker``."""
        ...

    def compile(self, pack: Rulepack, compiling: Compiling) -> Any:
        """The section ready for use at run time (None when there is nothing to compile)."""
        ...


class Declared:
    """What a section of the engine declares in the root model, and its checks."""

    __slots__ = ("annotation", "checks", "default", "types")

    def __init__(
        self,
        annotation: Any,
        default: Any,
        types: Mapping[str, Any] | None = None,
        checks: Callable[[Rulepack, PackChecker], None] | None = None,
    ) -> None:
        self.annotation = annotation
        self.default = default
        self.types: Mapping[str, Any] = types or {}
        self.checks = checks


class BuiltinSection:
    """A section of the engine (implements ``Section``). ``declare`` gives its model and
    checks when asked for: a function, or the ``"module:function"`` of one, imported then
    (see the module's text); ``compiler`` its compiled form; ``template_variables`` what
    templates of each purpose it defines see (templates may also use every context key
    their pack declares)."""

    __slots__ = ("compiler", "declare", "key", "template_variables")

    def __init__(
        self,
        key: str,
        declare: str | Callable[[], Declared],
        compiler: str | Callable[[Rulepack, Compiling], Any] | None = None,
        template_variables: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.key = key
        self.declare = declare
        self.compiler = compiler
        self.template_variables: Mapping[str, frozenset[str]] = template_variables or {}

    def __repr__(self) -> str:
        return f"BuiltinSection({self.key!r})"

    @property
    def declared(self) -> Declared:
        """Asked afresh each time: what ``contracts:`` holds changes as kinds register."""
        if isinstance(self.declare, str):
            # The one lazy boundary (see the module's text): the declaring modules of all
            # sections are 0.3 s of imports (pydantic, the models), which a pack compiled
            # from its image never needs. The table names them; the first use imports them.
            declare: Callable[[], Declared] = _resolved(self.declare)
            return declare()
        return self.declare()

    @property
    def annotation(self) -> Any:
        return self.declared.annotation

    @property
    def default(self) -> Any:
        return self.declared.default

    @property
    def types(self) -> Mapping[str, Any]:
        return self.declared.types

    def check(self, pack: Rulepack, checker: PackChecker) -> None:
        checks = self.declared.checks
        if checks is not None:
            checks(pack, checker)

    def compile(self, pack: Rulepack, compiling: Compiling) -> Any:
        if self.compiler is None:
            return None
        if isinstance(self.compiler, str):
            # The same boundary: a section's runtime (its schemas, templates, the
            # email.utils date parser) is imported when a pack first uses the section,
            # not by every command that loads a pack (`rules eval` of a pack with no
            # gates, budgets or conflicts: 40 ms of imports; python -X importtime).
            compiler: Callable[[Rulepack, Compiling], Any] = _resolved(self.compiler)
            return compiler(pack, compiling)
        return self.compiler(pack, compiling)


def _resolved(reference: str) -> Any:
    """The object a ``"module:name"`` reference names, its module imported."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


def mapping(
    keys: Any,
    model: type[Any],
    checks: Callable[[Rulepack, PackChecker], None] | None = None,
    **field_options: Any,
) -> Declared:
    """A section whose value maps names (of type ``keys``) to ``model``s, empty when a pack
    leaves it out."""
    # Deferred with the section's model (see the module's text): only composing needs it.
    from pydantic import Field

    return Declared(
        dict[keys, model],  # type: ignore[valid-type]
        Field(default_factory=dict, **field_options),
        {model.__name__: model},
        checks,
    )


def single(
    model: Any, checks: Callable[[Rulepack, PackChecker], None] | None = None, **field_options: Any
) -> Declared:
    """A section whose value is one ``model`` (or None, or a list: ``model`` is then the
    annotation and ``field_options`` say the default)."""
    # Deferred with the section's model (see the module's text): only composing needs it.
    from pydantic import Field

    if not field_options:
        field_options = {"default_factory": model}
    named = model if isinstance(model, type) and not isinstance(model, GenericAlias) else None
    return Declared(model, Field(**field_options), {named.__name__: named} if named else {}, checks)


# ------------------------------------------------------------- the format's own vocabulary
# The sections every other section refers to; their models are in vocabulary.py, declared
# in declared.py.


SEVERITIES = BuiltinSection("severities", "engine.format.declared:severities")
FAILURE_TYPES = BuiltinSection("failure_types", "engine.format.declared:failure_types")
ACTIONS = BuiltinSection("actions", "engine.format.declared:actions")
CONTEXT = BuiltinSection("context", "engine.format.declared:context")
SESSION = BuiltinSection("session", "engine.format.declared:session")
