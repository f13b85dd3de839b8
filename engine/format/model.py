"""The rulepack format, version 1: the root model, its core keys (``rulepack``, ``version``,
``format``, ``requires``, ``description``, ``extends``) composed with the registered sections
(``engine.pack.sections``). Each section's model lives with the section: the format's own
vocabulary in vocabulary.py, the policies in ``policy/``, prompts in ``prompts/``, the pack's
tests in ``engine.pack.cases``; the contract models are the kinds' (``engine.contracts``).

Every model is frozen and forbids unknown keys, so a key written where it does not apply is
a finding. Strings that point at something else carry a ``Ref`` marker in their annotation;
`rules check` walks the models and resolves each marked value generically (see semantics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model

from engine.format.fields import ContractRef, Name, Strict, TemplateRef
from engine.format.fields import Ref as Ref  # re-exported: callers walk the root with it
from engine.format.vocabulary import ActionSpec, ContextKey, FailureType, SessionKeys

if TYPE_CHECKING:  # the sections' models, given at run time by compose_rulepack
    # The models of the contract kinds, for type checking only: at run time the contract
    # registry hands them to compose_rulepack (``Contract`` is then the union of the
    # registered kinds' models, told apart by ``kind``).
    from engine.contracts.model import ContractModel as Contract
    from engine.contracts.sentinel.model import SentinelGrammar
    from engine.pack.cases import PackTest
    from engine.policy.choices.model import Menu
    from engine.policy.conflicts.model import ConflictRules
    from engine.policy.gates.model import Gates
    from engine.policy.limits.model import Limits, RateLimits
    from engine.policy.rounds.model import Rounds
    from engine.policy.triggers.model import Hint, Trigger
    from engine.prompts.examples.model import Examples
    from engine.prompts.templates.model import TemplateSpec

FORMAT_VERSION = 1


# --------------------------------------------------------------------------- the pack


_section_types: dict[str, Any] = {}
"""The section models the root was last composed with (``compose_rulepack``)."""


def _section_default(name: str) -> Callable[[], Any]:
    """The default of a section whose model the root gets at run time: a fresh instance of
    the model named ``name`` in the namespace the root was composed with."""
    return lambda: _section_types[name]()


class Rulepack(Strict):
    """A rulepack: vocabulary, contracts, policies and the pack's own tests."""

    rulepack: Name
    version: str = Field(default="0.0.0", pattern=r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
    format: int = Field(default=FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    requires: str = Field(default=">=0.1", pattern=r"^\s*(([<>]=?|==|!=)\s*\d+(\.\d+)*\s*,?\s*)+$")
    description: str = ""
    extends: list[str] = Field(default_factory=list)
    severities: dict[str, int] = Field(default_factory=dict)
    failure_types: dict[str, FailureType] = Field(default_factory=dict)
    actions: dict[str, ActionSpec] = Field(default_factory=dict)
    context: dict[str, ContextKey] = Field(default_factory=dict)
    session: SessionKeys = Field(default_factory=SessionKeys)
    # A model of the sentinel kind: built from {} (the factory cannot name it here).
    sentinel: SentinelGrammar = Field(default_factory=dict, validate_default=True)
    contracts: dict[str, Contract] = Field(default_factory=dict)
    triggers: dict[ContractRef, Trigger] = Field(default_factory=dict)
    hints: list[Hint] = Field(default_factory=list)
    templates: dict[str, TemplateSpec] = Field(default_factory=dict)
    examples: Examples = Field(default_factory=_section_default("Examples"))
    rate_limits: dict[ContractRef, RateLimits] = Field(
        default_factory=dict,
        description="per block: limits on counts in its outputs, "
        "per round and over a window of rounds",
    )
    gates: Gates = Field(default_factory=_section_default("Gates"))
    conflicts: ConflictRules | None = None
    prompts: dict[ContractRef, TemplateRef] = Field(
        default_factory=dict,
        description="per block: the template (purpose `initial`) of its first prompt, which "
        "`rules prompt` renders with the decisions of the previous round",
    )
    menus: dict[Name, Menu] = Field(default_factory=dict)
    rounds: Rounds | None = None
    limits: Limits = Field(default_factory=_section_default("Limits"))
    tests: list[PackTest] = Field(default_factory=list)


def compose_rulepack(
    types: Mapping[str, Any], extra_fields: Mapping[str, tuple[Any, Any]]
) -> type[Rulepack]:
    """The root model with the sections and contract kinds registered now.

    ``types`` resolves the names the annotations of ``Rulepack`` use for the models that
    sections and kinds own (``Contract`` is the union of the registered kinds' models);
    ``extra_fields`` are the sections the root does not declare (registered from outside the
    engine), added by a subclass of ``Rulepack``.
    """
    _section_types.clear()
    _section_types.update(types)
    Rulepack.model_rebuild(force=True, _types_namespace=dict(types))
    if not extra_fields:
        return Rulepack
    composed: type[Rulepack] = create_model(  # type: ignore[call-overload]
        "Rulepack", __base__=Rulepack, __module__=__name__, **extra_fields
    )
    return composed
