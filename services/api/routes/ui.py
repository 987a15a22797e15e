"""The topology page: an index, and each topology's page (services/api/page.py). Neither
holds data: their scripts read the API, with the token when reads need one."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse

from services.api import page
from services.api.context import Ctx, topology_id_of
from services.api.errors import PAGE_ERRORS

router = APIRouter(tags=["ui"], responses=PAGE_ERRORS)


@router.get("/ui", summary="Topologies, with links to their pages", response_class=HTMLResponse)
async def ui_index() -> HTMLResponse:
    return _page(*page.index_page())


@router.get("/ui/topologies/{topology_id}", response_class=HTMLResponse,
            summary="The topology's DAG, charts over Storm's windows, errors, drill-down")
async def ui_topology(request: Request, ctx: Ctx, topology_id: Annotated[str, Path(
        pattern=r"^[A-Za-z0-9._-]{1,200}$")]) -> HTMLResponse:
    if not ctx.settings.reads_need_token:  # else an unknown id is the script's to say
        topology_id = await asyncio.to_thread(topology_id_of, request, topology_id)
        await ctx.record(topology_id)  # 404 for an unknown id
    return _page(*page.topology_page(topology_id))


def _page(body: str, policy: str) -> HTMLResponse:
    return HTMLResponse(body, headers={"Content-Security-Policy": policy})
