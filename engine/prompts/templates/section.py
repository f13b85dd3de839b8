"""The ``templates:`` and ``prompts:`` sections: the model in ``model.py``, the checks in
``checks.py``, compiling and rendering in ``engine.prompts.compiled`` and ``render``; here
what a first prompt sees and how the templates compile (with the contract texts, hints
and example files rendering reads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.format.section import BuiltinSection, Compiling
from engine.policy.triggers.section import EXAMPLE_VARIABLES

if TYPE_CHECKING:
    from collections.abc import Mapping

    from engine.format.model import Rulepack
    from engine.prompts.compiled import CompiledPrompts

# Variables the engine provides to a block's first prompt (``prompts:``), with the
# decisions of the previous round and the block's contract text.
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    "initial": frozenset(
        {
            "block",
            "nonce",
            "format_contract",
            "resolutions",
        }
    )
    | EXAMPLE_VARIABLES,
}


def _compile(pack: Rulepack, compiling: Compiling) -> CompiledPrompts:
    """Everything rendering needs from the pack: its templates (all compiled now, or each
    when first used), contract texts, hints and example files."""
    # Deferred for start-up time: a command that evaluates one output renders nothing
    # (`rules eval` from a pack's image: 8 ms of its 0.13 s, measured with -X importtime).
    from engine.prompts.compiled import compile_prompts

    contracts = compiling.section("contracts")

    def id_patterns(block: str) -> Mapping[str, str]:
        return contracts[block].id_patterns if block in contracts else {}

    def generated_text(block: str) -> str:
        """The contract text a compiled contract writes itself (``CompiledContract``'s
        optional ``generated_contract_text``)."""
        if block not in contracts:
            return ""
        return str(getattr(contracts[block], "generated_contract_text", "") or "")

    prompts = compile_prompts(
        pack, compiling.root, id_patterns, compiling.folder_of, generated_text
    )
    if not compiling.lazy:
        prompts.build_all()
    return prompts


TEMPLATES = BuiltinSection(
    "templates", "engine.prompts.templates.checks:declared_templates", _compile
)
PROMPTS = BuiltinSection(
    "prompts",
    "engine.prompts.templates.checks:declared_prompts",
    template_variables=TEMPLATE_VARIABLES,
)
