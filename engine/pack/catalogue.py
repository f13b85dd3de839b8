"""The catalogue of finding rules: every rule `rules check` can report, what it means and how
to fix it (`rules check --list-rules`, the rules of SARIF output).

Each rule is a ``FindingRule`` defined beside the code that emits it; defining it registers it
(``engine.format.findings``). Listing them all means importing every module that defines
rules: the format's own (reading, validation, semantics), every registered contract kind and
policy section (the engine's and those registered from outside), and the pack's tests.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.contracts import registry as kinds

# Imported for the rules they define (defining a rule registers it).
from engine.format import gitpacks, loader_rules, semantics, validate  # noqa: F401
from engine.format.findings import FindingRule, registered_rules
from engine.pack import loaded, prove, selftests  # noqa: F401
from engine.pack.sections import sections


class RuleText(NamedTuple):
    description: str
    fix: str


def rule_catalogue() -> dict[str, FindingRule]:
    """Every finding rule, by id (sorted), once each module that defines rules is imported:
    the kinds' modules are imported when first used, entry points when first listed."""
    for name in kinds.kind_names():
        kinds.contract_kind(name)
    for section in sections():
        section.types  # noqa: B018 (the engine's sections import their checks when asked)
    return registered_rules()


def describe(rule: str) -> RuleText:
    """What the rule ``rule`` means and how to fix it (a generic text for an unknown id)."""
    known = rule_catalogue().get(rule)
    if known is None:
        return RuleText(rule, "See the finding's fix.")
    return RuleText(known.description, known.fix)
