"""GET /v1/packs and GET /v1/packs/{name} (the `rules explain` tables as data)."""

from __future__ import annotations

from fastapi import Path, Query, Request

from engine.pack.compiled import Pack
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
from engine.server.security import api_router
from engine.session.explain import explain

router = api_router("packs")


@router.get(
    "/packs",
    summary="The served packs: name, version, revision, blocks",
    responses=route_responses(PackList, UNAUTHORIZED),
)
async def list_packs(request: Request) -> Document:
    packs = request.app.state.live.current.packs
    return Document({"packs": [{**about(p), "blocks": p.blocks} for _, p in sorted(packs.items())]})


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
    return Document({"pack": about(pack), **explain(pack, block).tables})
