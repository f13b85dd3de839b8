"""The rulepack format, version 1: the root model, composed of the registered sections
(``engine.pack.sections``: each section's model lives with the section, in ``policy/`` or
``prompts/``), the format's own vocabulary (failure types, severities, actions, context keys,
session keys) and the pack's tests; the contract models are the kinds' (``engine.contracts``).

Every model is frozen and forbids unknown keys, so a key written where it does not apply is
a finding. Strings that point at something else carry a ``Ref`` marker in their annotation;
`rules check` walks the models and resolves each marked value generically (see semantics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, create_model, model_validator

from engine.format.fields import (
    ITEM_PARTS,
    ActionRef,
    ContextKeyRef,
    ContractRef,
    FailureRef,
    ItemPartRef,
    Name,
    PackPath,
    Ref,
    SeverityRef,
    Strict,
    TemplateRef,
)

if TYPE_CHECKING:  # the sections' models, given at run time by compose_rulepack
    # The models of the contract kinds, for type checking only: at run time the contract
    # registry hands them to compose_rulepack (``Contract`` is then the union of the
    # registered kinds' models, told apart by ``kind``).
    from engine.contracts.model import ContractModel as Contract
    from engine.contracts.sentinel.model import SentinelGrammar
    from engine.policy.choices.model import Menu
    from engine.policy.conflicts.model import ConflictRules
    from engine.policy.gates.model import Gates
    from engine.policy.limits.model import Limits, RateLimits
    from engine.policy.rounds.model import Rounds
    from engine.policy.triggers.model import Hint, Trigger
    from engine.prompts.examples.model import Examples
    from engine.prompts.templates.model import TemplateSpec

__all__ = ["ITEM_PARTS", "Ref", "Strict"]

FORMAT_VERSION = 1


# --------------------------------------------------------------------------- vocabulary


class FailureType(Strict):
    """One kind of failure: how bad it is, whether a retry can help, what to tell the model."""

    severity: SeverityRef = "HIGH"
    retriable: bool = True
    explain: str = ""
    description: str = ""


class ActionSpec(Strict):
    """An action a decision can take. The engine knows the standard ones; packs may add more."""

    final: bool = True
    exit_code: int = Field(default=1, ge=0, le=125)
    description: str = ""


class ContextKey(Strict):
    """A context key the pack reads, with its type."""

    type: Literal["string", "int", "number", "bool", "list", "map", "path", "any"] = "string"
    items: Literal["string", "int", "number", "bool", "map", "any"] | None = None
    required: bool = False
    default: Any = None
    env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable read when no value is given (before `default`)",
    )
    description: str = ""


# ------------------------------------------------------------------- the pack's own tests


class Expectation(Strict):
    ok: bool | None = None
    status: Literal["pass", "warn", "fail"] | None = None
    failure: FailureRef | None = None
    message: str | None = None
    data: Any = None
    warnings: list[str] | None = None
    action: ActionRef | None = None
    data_includes: dict[str, Any] | None = Field(
        default=None,
        description="keys the verdict's data must hold with these values (null: absent); "
        "`data` compares the whole data",
    )
    valid: bool | None = Field(default=None, description="a gate case: the gate's verdict")
    errors: list[str] | None = Field(default=None, description="a gate case: its errors, in order")
    rule: str | None = Field(
        default=None, description="what decided: pass, exhausted, attempt:K, guard:NAME, ..."
    )
    prompt: str | None = Field(
        default=None,
        description="a golden file (relative to the case's folder) the rendered prompt must "
        "equal; `rules test --update` writes it",
    )


class PackTest(Strict):
    """One case of the pack's own tests (`rules test`): an output and what it must give."""

    name: str = Field(min_length=1)
    block: ContractRef | None = None
    gate: str | None = Field(
        default=None,
        description="instead of a block: a quality gate (a name of `gates.steps`) run on the "
        "input's JSON documents",
    )
    retry: int = Field(default=0, ge=0, description="a gate case's retry count")
    now: str | None = Field(default=None, description="a gate case's clock, ISO 8601")
    input: str | None = None
    input_file: PackPath | None = None
    nonce: str | None = None
    vars: dict[str, str] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    attempt: int = Field(default=1, ge=1)
    error: str | None = Field(
        default=None,
        description="an error another tool reported for the output (as `rules eval --error`)",
    )
    expect: Expectation

    @model_validator(mode="after")
    def _one_input(self) -> PackTest:
        if (self.input is None) == (self.input_file is None):
            raise ValueError("give exactly one of `input` or `input_file`")
        if (self.block is None) == (self.gate is None):
            raise ValueError("give exactly one of `block` or `gate`")
        return self


# --------------------------------------------------------------------------- the pack


class SessionKeys(Strict):
    """Which of the pack's context keys tell the engine about the session (all optional),
    and whether a session keeps its outputs."""

    folder: ContextKeyRef | None = Field(
        default=None,
        description="the folder holding earlier rounds' outputs (example "
        "tier 2) and, when it has one, the ledger whose accepted rounds count",
    )
    round: ContextKeyRef | None = Field(
        default=None,
        description="the current round number: recorded with each attempt "
        "in the ledger, and the start of example tier 2's search",
    )
    decided: ContextKeyRef | None = Field(
        default=None,
        description="receives the session's resolved conflicts ([{id, option, summary, "
        "decision, rationale, <fields>...}]) unless the context already gives it",
    )
    history: ContextKeyRef | None = Field(
        default=None,
        description="earlier rounds' counts of a block's rate limits, "
        "[[round, count, total], ...], used when no session ledger holds them",
    )
    prompt: ContextKeyRef | None = Field(
        default=None,
        description="receives the text of `rules run --prompt` unless the context already gives it",
    )
    item: list[ItemPartRef] = Field(
        default_factory=lambda: ["nonce", "params"],
        min_length=1,
        description="what identifies an item, whose attempts are counted together (with its "
        "block): `nonce`, `params` (the block's --var values) and context keys; a new value "
        "of any of them is a new item whose first output is attempt 1 (e.g. [round])",
    )
    keep_outputs: bool = Field(
        default=False,
        description="keep every output a session evaluates with this pack in its ledger, "
        "compressed, as `--keep-outputs` does: `rules export` and `rules backtest` replay them",
    )


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
