"""The registry of rulepack sections: the engine's own, those registered with
``register_section``, and those of installed distributions (entry point group
``rules_engine.sections``, each naming an object that implements ``format.section.Section``).

``rulepack_model()`` is the root model composed of every registered section and contract kind;
everything that validates a pack or describes the format asks it for the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from engine.contracts import registry as kinds
from engine.core.registry import Registry
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

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

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

_sections: Registry[Section] = Registry(
    ENTRY_POINT_GROUP, "rulepack section", lambda key: any(s.key == key for s in _BUILTIN)
)
_composed: type[Rulepack] | None = None
# the versions of this registry and of the contract registry _composed was composed with
_composed_with = (-1, -1)


def register_section(section: Section) -> None:
    """Add a section (a program or a test registers one this way; entry points do the same)."""
    _sections.register(section.key, section)


def unregister_section(key: str) -> None:
    """Remove a section registered with ``register_section`` (tests clean up this way)."""
    _sections.unregister(key)


def _accept(point: EntryPoint, section: Any) -> None:
    if point.name not in _sections.registered:
        register_section(section)


def sections() -> tuple[Section, ...]:
    """Every registered section: the engine's own first, then the others by name."""
    _sections.load_entry_points(_accept)
    registered = _sections.registered
    return _BUILTIN + tuple(registered[k] for k in sorted(registered))


def rulepack_model() -> type[Rulepack]:
    """The root model of the sections and contract kinds registered now (composed once)."""
    global _composed, _composed_with
    if _composed is None or _composed_with != (_sections.version, kinds.version()):
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
        # after sections and contract_types: they may load entry points
        _composed_with = (_sections.version, kinds.version())
    return _composed
