"""GET /v1/packs and GET /v1/packs/{name} (the `rules explain` tables as data)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request

from engine.format.actions import STANDARD_ACTIONS
from engine.format.model import Rulepack
from engine.pack.compiled import Pack
from engine.policy.triggers.model import Trigger
from engine.server.documents import PackList, PackTables
from engine.server.evaluation import about, check_block
from engine.server.problems import (
    NOT_FOUND,
    UNAUTHORIZED,
    UNKNOWN_BLOCK,
    Problem,
    route_responses,
)
from engine.server.responses import Document
from engine.server.security import require_token

router = APIRouter(prefix="/v1", dependencies=[Depends(require_token)], tags=["packs"])


@router.get(
    "/packs",
    summary="The served packs: name, version, revision, blocks",
    responses=route_responses(PackList, UNAUTHORIZED),
)
async def list_packs(request: Request) -> Document:
    packs = request.app.state.live.current.packs
    return Document({"packs": [{**about(p), "blocks": p.blocks} for _, p in sorted(packs.items())]})


def explain_tables(model: Rulepack, block: str | None = None) -> dict[str, Any]:
    """The tables `rules explain` prints, as data: a row per block of the trigger table,
    the guards, the failure types and the actions."""
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
                "max_attempts": trigger.max_attempts if trigger.on else 0,
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


@router.get(
    "/packs/{name}",
    summary="A pack's trigger table, guards, failure types and actions (`rules explain`)",
    responses=route_responses(PackTables, UNAUTHORIZED, NOT_FOUND, UNKNOWN_BLOCK),
)
async def explain_pack(
    request: Request,
    name: str = Path(description="The pack's name."),
    block: str | None = Query(None, description="Only this block's row."),
) -> Document:
    pack: Pack | None = request.app.state.live.current.get(name)
    if pack is None:
        raise Problem(NOT_FOUND, f"no pack {name!r} is served (GET /v1/packs lists them)")
    if block is not None:
        check_block(pack, block)
    return Document({"pack": about(pack), **explain_tables(pack.model, block)})
