"""The one table of the engine's rulepack sections, and the registry of the others: those
registered with ``register_section`` and those of installed distributions (entry point
group ``rules_engine.sections``, each naming an object that implements
``format.section.Section``).

A section declares its model, checks, compiled form and template variables in its own
home; this table only lists them, in the order of the format's keys. ``rulepack_model()``
is the root model composed of every registered section (contract kinds included, through
``contracts:``); everything that validates a pack or describes the format asks it for the
model. ``Pack`` compiles each section through the same table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.contracts import registry as kinds
from engine.contracts.section import SECTIONS as CONTRACT_SECTIONS
from engine.core.errors import EngineError, plugin_errors
from engine.core.registry import Registry
from engine.format.section import (
    ACTIONS,
    CONTEXT,
    FAILURE_TYPES,
    SESSION,
    SEVERITIES,
    BuiltinSection,
    Section,
)
from engine.policy.budgets.section import BREAKERS, BUDGETS
from engine.policy.calls.section import MODEL_CALLS
from engine.policy.choices.section import MENUS
from engine.policy.conflicts.section import CONFLICTS
from engine.policy.gates.section import GATES
from engine.policy.limits.section import LIMITS, RATE_LIMITS
from engine.policy.reviews.section import REVIEWS
from engine.policy.rounds.section import ROUNDS
from engine.policy.triggers.section import HINTS, TRIGGERS
from engine.prompts.examples.section import EXAMPLES
from engine.prompts.templates.section import PROMPTS, TEMPLATES

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from engine.format.model import Rulepack

ENTRY_POINT_GROUP = "rules_engine.sections"


TESTS = BuiltinSection("tests", "engine.pack.cases:declared")
"""The pack's own tests: the models in cases.py, running them in selftests.py."""

# The engine's own sections, in the order of the format's keys.
BUILTIN: tuple[BuiltinSection, ...] = (
    SEVERITIES,
    FAILURE_TYPES,
    ACTIONS,
    CONTEXT,
    SESSION,
    *CONTRACT_SECTIONS,
    TRIGGERS,
    HINTS,
    TEMPLATES,
    EXAMPLES,
    RATE_LIMITS,
    GATES,
    CONFLICTS,
    PROMPTS,
    MENUS,
    ROUNDS,
    LIMITS,
    BUDGETS,
    BREAKERS,
    REVIEWS,
    MODEL_CALLS,
    TESTS,
)
_BUILTIN_KEYS = {section.key: section for section in BUILTIN}

_sections: Registry[Section] = Registry(
    ENTRY_POINT_GROUP, "rulepack section", _BUILTIN_KEYS.__contains__
)
_composed: type[Rulepack] | None = None
# the versions of this registry and of the contract registry _composed was composed with
_composed_with = (-1, -1)
_engine_only: type[Rulepack] | None = None
"""The root last composed of the engine's own sections and kinds alone."""


def register_section(section: Section) -> None:
    """Add a section (a program or a test registers one this way; entry points do the same)."""
    _sections.register(section.key, section)


def unregister_section(key: str) -> None:
    """Remove a section registered with ``register_section`` (tests clean up this way)."""
    _sections.unregister(key)


def _accept(point: EntryPoint, section: Any) -> None:
    """Register the section an entry point names, unless one of its key is there already;
    an object that is no section (None, a number) is a broken plugin named as such."""
    with plugin_errors(_sections.what, point):
        key = getattr(section, "key", None)
        if point.name != key:
            raise EngineError(f"it names the section key {key!r}, not {point.name!r}")
        if point.name not in _sections.registered:
            register_section(section)


def sections() -> tuple[Section, ...]:
    """Every registered section: the engine's own first, then the others by name."""
    _sections.load_entry_points(_accept)
    registered = _sections.registered
    return BUILTIN + tuple(registered[k] for k in sorted(registered))


def section(key: str) -> Section | None:
    """The section of ``key``: the engine's own without reading entry points (a pack read
    back from its image compiles only those), else a registered one."""
    found = _BUILTIN_KEYS.get(key)
    if found is not None:
        return found
    return next((s for s in sections() if s.key == key), None)


def template_variables(every: tuple[Section, ...]) -> dict[str, frozenset[str]]:
    """What templates of each purpose see, as the sections that define the purposes say."""
    variables: dict[str, frozenset[str]] = {}
    for each in every:
        variables.update(getattr(each, "template_variables", {}))
    return variables


def rulepack_model() -> type[Rulepack]:
    """The root model of the sections and contract kinds registered now (composed once)."""
    global _composed, _composed_with, _engine_only
    if _composed is None or _composed_with != (_sections.version, kinds.version()):
        # Deferred: composing needs pydantic and the root model, 0.22 s that compiling a
        # pack from its image does not pay (python -X importtime).
        from engine.format.model import compose_rulepack

        every = sections()
        types: dict[str, Any] = {}
        for each in every:
            types.update(each.types)
        fields = {each.key: (each.annotation, each.default) for each in every}
        _composed = compose_rulepack(fields, types)
        # after sections and the contracts' types: they may load entry points
        _composed_with = (_sections.version, kinds.version())
        if every == BUILTIN and len(kinds.kind_names()) == len(kinds.contract_models(True)):
            _engine_only = _composed
    return _composed


def from_engine_alone(model: type[Any]) -> bool:
    """Whether ``model`` is a root composed of the engine's own sections and kinds alone
    (a pack validated by one composed with others may read its data other than by its
    fields: engine.pack.image writes no image of it)."""
    return model is _engine_only
