"""The explain use case: a pack's trigger table, guards, failure types and actions as data,
once: `rules explain` writes them as tables (engine.report), GET /v1/packs/{name} answers
them as its document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.core.patterns import pattern_engine
from engine.format.actions import STANDARD_ACTIONS
from engine.format.model import Ref, Rulepack
from engine.format.semantics import walk_references
from engine.pack.compiled import Pack
from engine.pack.prove import prove
from engine.policy.triggers.model import Trigger


@dataclass(frozen=True)
class Explained:
    """A pack's tables (``tables``: the document of GET /v1/packs/{name} without the
    pack's name) and its model, whose menus and rounds the text adds."""

    model: Rulepack
    tables: dict[str, Any]


def explain(pack: Pack, block: str | None = None) -> Explained:
    """The tables of ``pack`` (only ``block``'s row of the trigger table, when given: an
    EngineError naming the blocks when the pack has no such block)."""
    if block is not None:
        pack.contract(block)
    tables = explain_tables(pack.model, block)
    tables["worst_case"] = [proof.to_json() for proof in prove(pack, block).blocks]
    tables["budgets"] = [
        {"name": name, **spec.model_dump(mode="json", exclude={"description"})}
        for name, spec in pack.model.budgets.items()
        if block is None or not spec.blocks or block in spec.blocks
    ]
    tables["breakers"] = [
        {"name": name, **spec.model_dump(mode="json", exclude={"description"})}
        for name, spec in pack.model.breakers.items()
        if block is None or not spec.blocks or block in spec.blocks
    ]
    return Explained(pack.model, tables)


def explain_tables(model: Rulepack, block: str | None = None) -> dict[str, Any]:
    """A row per block of the trigger table, the guards, the failure types and the
    actions."""
    names = [block] if block else list(model.contracts)
    rows, guards = [], {}
    for name in names:
        trigger = model.triggers.get(name) or Trigger()
        after = trigger.after_failure
        rows.append(
            {
                "block": name,
                "repair_on": list(trigger.on),
                "action": trigger.action if trigger.on else None,
                # Outputs in all, the original included, as a decision counts them.
                "max_attempts": trigger.max_attempts + 1 if trigger.on else 1,
                "template": trigger.template,
                "skip_when": [g.name for g in trigger.skip_when],
                "after_failure": {
                    "action": after.action,
                    "default": after.default,
                    "log": after.log,
                },
            }
        )
        for guard in trigger.skip_when:
            guards[guard.name] = {"name": guard.name, "when": guard.when, "reason": guard.reason}
    return {
        "description": model.description or None,
        "blocks": rows,
        "guards": list(guards.values()),
        "failure_types": [
            {
                "name": name,
                "severity": ft.severity,
                "retriable": ft.retriable,
                "explain": ft.explain,
            }
            for name, ft in model.failure_types.items()
        ],
        "actions": [
            {
                "name": name,
                "exit_code": spec.exit_code,
                "final": spec.final,
                "description": spec.description or None,
            }
            for name, spec in {**STANDARD_ACTIONS, **model.actions}.items()
        ],
    }


def pattern_rows(pack: Rulepack, block: str | None = None) -> list[list[str]]:
    """Every pattern the pack declares (or block ``block`` declares), once per place: the
    pattern, where it is, the engine that runs it and why (`rules explain --patterns`)."""
    rows = []
    seen: set[tuple[str, str]] = set()
    for ref in walk_references(pack, Rulepack, (), ()):
        if ref.kind is not Ref.PATTERN:
            continue
        if block is not None and ref.path[:2] != ("contracts", block):
            continue
        where = ".".join(str(part) for part in ref.path)
        if (where, ref.value) in seen:
            continue
        seen.add((where, ref.value))
        engine, reason = pattern_engine(ref.value)
        rows.append([ref.value, where, engine, reason])
    return rows
