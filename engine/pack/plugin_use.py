"""Findings for a pack that uses a plugin that could not be loaded.

An entry point that raised, exited or did not load in time is set aside by its registry
(``engine.core.registry.broken_plugins``): a pack that does not use it loads as if it were
not installed. A pack that does, with ``kind: NAME`` or a top-level key ``NAME:``, gets a
``plugin-broken`` error there, naming the entry point and why, instead of the unknown kind
or key the format alone would report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.contracts.registry import ENTRY_POINT_GROUP as KINDS
from engine.core.registry import broken_plugins
from engine.format.findings import Finding, FindingRule
from engine.format.sourcemap import SourceMap
from engine.pack.sections import ENTRY_POINT_GROUP as SECTIONS

PLUGIN_BROKEN = FindingRule(
    "plugin-broken",
    "The pack uses a contract kind or section whose plugin could not be loaded.",
    "Fix or reinstall the distribution that provides it (the message names its entry "
    "point), or remove it from the environment.",
)

_REPLACED = ("unknown-kind", "unknown-key")


def plugin_findings(data: Any, source: SourceMap, findings: list[Finding]) -> list[Finding]:
    """``findings`` with a ``plugin-broken`` error for each use of a broken plugin in the
    pack ``data``, the unknown kind or key the format reported for it left out."""
    kinds, sections = broken_plugins(KINDS), broken_plugins(SECTIONS)
    if not (kinds or sections) or not isinstance(data, Mapping):
        return findings
    used: list[Finding] = []
    names: set[str] = set()
    contracts = data.get("contracts")
    for name, contract in (contracts or {}).items() if isinstance(contracts, Mapping) else ():
        kind = contract.get("kind") if isinstance(contract, Mapping) else None
        if isinstance(kind, str) and kind in kinds:
            where = source.locate(("contracts", name, "kind"))
            used.append(PLUGIN_BROKEN.at(kinds[kind], where, PLUGIN_BROKEN.fix))
            names.add(kind)
    for key in data:
        if isinstance(key, str) and key in sections:
            where = source.locate((key,), prefer_key=True)
            used.append(PLUGIN_BROKEN.at(sections[key], where, PLUGIN_BROKEN.fix))
            names.add(key)
    if not used:
        return findings
    kept = [
        f
        for f in findings
        if not (f.rule in _REPLACED and any(repr(name) in f.message for name in names))
    ]
    return kept + used
