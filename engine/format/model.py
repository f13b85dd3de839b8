"""The rulepack format, version 1: the root model's own keys (``rulepack``, ``version``,
``format``, ``requires``, ``description``, ``extends``), and the root composed of them and
of the sections (``compose_rulepack``). Each section's model lives with the section: the
format's own vocabulary in vocabulary.py, the policies in ``policy/``, prompts in
``prompts/``, the contracts in ``contracts/``, the pack's tests in ``engine.pack.cases``;
``engine.pack.sections`` holds the one table of them.

Every model is frozen and forbids unknown keys, so a key written where it does not apply is
a finding. Strings that point at something else carry a ``Ref`` marker in their annotation;
`rules check` walks the models and resolves each marked value generically (see semantics.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model

from engine.format.fields import Name, Strict
from engine.format.fields import Ref as Ref  # re-exported: callers walk the root with it

FORMAT_VERSION = 1


class Rulepack(Strict):
    """A rulepack: vocabulary, contracts, policies and the pack's own tests."""

    rulepack: Name
    version: str = Field(default="0.0.0", pattern=r"^\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")
    format: int = Field(default=FORMAT_VERSION, ge=1, le=FORMAT_VERSION)
    requires: str = Field(default=">=0.1", pattern=r"^\s*(([<>]=?|==|!=)\s*\d+(\.\d+)*\s*,?\s*)+$")
    description: str = ""
    extends: list[str] = Field(default_factory=list)

    if TYPE_CHECKING:
        # The sections' keys are fields of the composed root (``compose_rulepack``): type
        # checkers read them as values of any type.
        def __getattr__(self, name: str) -> Any: ...


def compose_rulepack(
    fields: Mapping[str, tuple[Any, Any]], types: Mapping[str, Any]
) -> type[Rulepack]:
    """The root model: the root's own keys, then each section's key (→ its annotation and
    default, as ``Section`` gives them) in the order given. ``types`` resolves names that
    string annotations of sections use."""
    composed: type[Rulepack] = create_model(  # type: ignore[call-overload]
        "Rulepack", __base__=Rulepack, __module__=__name__, __doc__=Rulepack.__doc__, **fields
    )
    composed.model_rebuild(force=True, _types_namespace=dict(types))
    return composed
