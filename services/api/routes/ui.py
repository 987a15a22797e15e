"""The topology page: an index, and each topology's DAG with live numbers."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from services.api import page
from services.api.context import Ctx, TopologyId
from services.api.errors import PAGE_ERRORS

router = APIRouter(tags=["ui"], responses=PAGE_ERRORS)


@router.get("/ui", summary="Topologies, with links to their pages", response_class=HTMLResponse)
async def ui_index(ctx: Ctx) -> HTMLResponse:
    recs = await ctx.records()
    return HTMLResponse(page.index_page([r.id for r in recs]))


@router.get("/ui/topologies/{topology_id}", response_class=HTMLResponse,
            summary="The topology's DAG with live per-component numbers")
async def ui_topology(ctx: Ctx, topology_id: TopologyId) -> HTMLResponse:
    await ctx.record(topology_id)  # 404 for an unknown id
    return HTMLResponse(page.topology_page(topology_id))
