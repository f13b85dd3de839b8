"""The registry of rulepack sections: the engine's own, those registered with
``register_section``, and those of installed distributions (entry point group
``rules_engine.sections``, each naming an object that implements ``format.section.Section``).

``rulepack_model()`` is the root model composed of every registered section and contract kind;
everything that validates a pack or describes the format asks it for the model.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engine.contracts import registry as kinds
from engine.core.errors import EngineError, load_plugins
from engine.format.model import Rulepack, compose_rulepack
from engine.format.section import Section
from engine.format.vocabulary import ACTIONS, CONTEXT, FAILURE_TYPES, SESSION, SEVERITIES
from engine.pack.cases import TESTS
from engine.policy.choices.section import MENUS
from engine.policy.conflicts.section import CONFLICTS
from engine.policy.gates.section import GATES
from engine.policy.limits.section import LIMITS, RATE_LIMITS
from engine.policy.rounds.section import ROUNDS
from engine.policy.triggers.section import HINTS, TRIGGERS
from engine.prompts.examples.section import EXAMPLES
from engine.prompts.templates.section import PROMPTS, TEMPLATES

ENTRY_POINT_GROUP = "rules_engine.sections"

# The engine's own sections, in the order of the format's keys.
_BUILTIN: tuple[Section, ...] = (
    SEVERITIES,
    FAILURE_TYPES,
    ACTIONS,
    CONTEXT,
    SESSION,
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
    TESTS,
)

_registered: dict[str, Section] = {}
_loaded_entry_points = False
_composed: type[Rulepack] | None = None
_composed_kinds = -1  # the contract registry's version _composed was composed with


def register_section(section: Section) -> None:
    """Add a section (a program or a test registers one this way; entry points do the same)."""
    global _composed
    if section.key in _registered or any(s.key == section.key for s in _BUILTIN):
        raise EngineError(f"a rulepack section {section.key!r} is already registered")
    _registered[section.key] = section
    _composed = None


def unregister_section(key: str) -> None:
    """Remove a section registered with ``register_section`` (tests clean up this way)."""
    global _composed
    _registered.pop(key, None)
    _composed = None


def _load_entry_points() -> None:
    global _loaded_entry_points
    if _loaded_entry_points:
        return
    _loaded_entry_points = True
    for point, section in load_plugins(ENTRY_POINT_GROUP, "rulepack section"):
        if point.name not in _registered:
            register_section(section)


def sections() -> tuple[Section, ...]:
    """Every registered section: the engine's own first, then the others by name."""
    _load_entry_points()
    return _BUILTIN + tuple(_registered[k] for k in sorted(_registered))


def rulepack_model() -> type[Rulepack]:
    """The root model of the sections and contract kinds registered now (composed once)."""
    global _composed, _composed_kinds
    if _composed is None or _composed_kinds != kinds.version():
        every = sections()
        types: dict[str, Any] = dict(kinds.contract_types())
        extra: dict[str, tuple[Any, Any]] = {}
        # The root resolves its annotations once, in place: there `contracts:` holds the
        # engine's own kinds; kinds registered from outside are a field of a composed subclass
        # (so a kind registered, or unregistered, after a first load is seen).
        engine_kinds = kinds.contract_models(engine_only=True)
        if len(engine_kinds) != len(kinds.kind_names()):
            every_kind = types["Contract"]
            extra["contracts"] = (dict[str, every_kind], Field(default_factory=dict))  # type: ignore[valid-type]
        types["Contract"] = kinds.contract_union(engine_kinds)
        for section in every:
            types.update(section.types)
            if section.key not in Rulepack.model_fields:
                extra[section.key] = (section.annotation, section.default)
        _composed = compose_rulepack(types, extra)
        _composed_kinds = kinds.version()  # after contract_types: it may load entry points
    return _composed
