"""The public plugin API: what a contract kind or a policy section written outside the engine
imports, from this one module (docs/format/plugins.md shows how).

A kind is an object implementing ``ContractKind``: a model (a ``ContractModel`` with
``kind: Literal["<name>"]``), checks, and a compiler giving a ``CompiledContract`` that
evaluates outputs into a ``Verdict``. A section is an object implementing ``Section``: its
key, model, checks and compiled form. Either is registered by a program
(``register_kind``, ``register_section``) or named by an entry point of group
``rules_engine.kinds`` or ``rules_engine.sections``. Checks report ``FindingRule``s through
the ``PackChecker`` they are given. The modules these names come from are the engine's
own and may move; these names stay.
"""

from __future__ import annotations

from engine.contracts.kind import (
    CompiledContract,
    ContractKind,
    EvaluationInput,
    PrefixReader,
    StandaloneKind,
    WithoutParser,
    readable_text,
)
from engine.contracts.model import ContractModel, declared_default_failures
from engine.contracts.registry import register_kind, unregister_kind
from engine.core.errors import no_parser_error
from engine.core.results import Failure, ParseResult
from engine.core.verdict import Verdict, verdict_from_checks
from engine.format.fields import (
    ContractRef,
    Expression,
    FailureRef,
    Message,
    Name,
    PackPath,
    Pattern,
    Ref,
    SeverityRef,
    Strict,
    TemplateRef,
)
from engine.format.findings import FindingRule
from engine.format.model import Rulepack
from engine.format.section import Compiling, Section
from engine.format.semantics import PackChecker
from engine.format.sourcemap import KeyPath
from engine.pack.sections import register_section, unregister_section

__all__ = [
    "CompiledContract",
    "Compiling",
    "ContractKind",
    "ContractModel",
    "ContractRef",
    "EvaluationInput",
    "Expression",
    "Failure",
    "FailureRef",
    "FindingRule",
    "KeyPath",
    "Message",
    "Name",
    "PackChecker",
    "PackPath",
    "ParseResult",
    "Pattern",
    "PrefixReader",
    "Ref",
    "Rulepack",
    "Section",
    "SeverityRef",
    "StandaloneKind",
    "Strict",
    "TemplateRef",
    "Verdict",
    "WithoutParser",
    "declared_default_failures",
    "no_parser_error",
    "readable_text",
    "register_kind",
    "register_section",
    "unregister_kind",
    "unregister_section",
    "verdict_from_checks",
]
