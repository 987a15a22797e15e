"""Our own routes: submit, list, read and operate on topologies; the live workers."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request, Response
from pydantic import BaseModel, Field

from services.api import responses, views
from services.api.context import SUBMIT, WRITE, Ctx, IfMatch, TopologyId
from services.api.errors import READ_ERRORS
from squall.coord import read_teardowns, teardown_of
from squall.core.control.cluster import WorkerAssignment
from squall.core.errors import NotFoundError, TopologyError
from squall.core.topology.checks import MAX_DEPTH, MAX_SPEC_BYTES
from squall.core.topology.model import TopologySpec
from squall.core.topology.schema import topology_json_schema

router = APIRouter(responses=READ_ERRORS)
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")
_SPEC_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": topology_json_schema()},
    "application/yaml": {"schema": {"type": "string", "description":
                                    "the same topology, as YAML"}}}}}


class RebalanceRequest(BaseModel):
    wait_s: float | None = Field(None, ge=0, le=86_400,
                                 description="drain time (default: the message timeout)")
    parallelism: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict, description="new parallelism per spout")


class KillRequest(BaseModel):
    wait_s: float | None = Field(None, ge=0, le=86_400,
                                 description="drain time (default: the message timeout)")
    purge_state: bool = Field(False, description="delete its Trident state and dead "
                              "letters too (kept by default: they are the user's)")


def _parse_spec(raw: bytes, content_type: str) -> TopologySpec:
    if len(raw) > MAX_SPEC_BYTES:
        raise TopologyError(f"the spec is {len(raw):,} bytes; at most {MAX_SPEC_BYTES:,}")
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise TopologyError("the body is not UTF-8 text") from None
    if content_type.split(";")[0].strip() in _YAML_TYPES:
        return TopologySpec.from_text(text)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise TopologyError(f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise TopologyError(f"the spec nests deeper than {MAX_DEPTH} levels") from None
    return TopologySpec.from_dict(doc)


@router.post("/topologies", tags=["topologies"], status_code=201, **SUBMIT,
             summary="Submit a topology (JSON or YAML)", openapi_extra=_SPEC_BODY,
             response_model=responses.TopologyView)
async def submit(ctx: Ctx, request: Request, activate: bool = True,
                 keep_state: Annotated[str | None, Query(
                     max_length=100, description=(
                         "keep the Trident state of a killed submission, and start the spouts "
                         "where its spouts got to: its id, or a name (its newest submission; "
                         "empty: this topology's name). Checked for compatibility (409 if "
                         "not: docs/trident.md)"))] = None) -> dict[str, Any]:
    spec = await asyncio.to_thread(_parse_spec, await request.body(),
                                   request.headers.get("content-type", "application/json"))
    rec = await ctx.submit(spec, activate, keep_state)
    return views.topology_view(rec, ctx.now(), {}, {})


@router.get("/topologies", tags=["topologies"], summary="Every topology with its status",
            response_model=list[responses.TopologyItem])
async def list_topologies(ctx: Ctx) -> list[dict[str, Any]]:
    recs = await ctx.records()
    return [{"id": r.id, "name": r.display_name, "status": str(r.lifecycle.status),
             "version": r.version, "uptime_s": views.uptime_s(r, ctx.now())} for r in recs]


@router.get("/teardowns", tags=["topologies"],
            summary="Killed topologies: what each one's teardown removed and kept",
            response_model=list[responses.TeardownView])
async def teardowns(ctx: Ctx) -> list[dict[str, Any]]:
    return [views.teardown_view(t) for t in
            await asyncio.to_thread(read_teardowns, ctx.control.zk)]


@router.get("/teardowns/{topology_id}", tags=["topologies"],
            summary="A killed topology's teardown (404 until its kill wait is over)",
            response_model=responses.TeardownView)
async def teardown(ctx: Ctx, topology_id: Annotated[str, Path(
        pattern=r"^[A-Za-z0-9._-]{1,200}$", description="the killed topology's id")]
                   ) -> dict[str, Any]:
    t = await asyncio.to_thread(teardown_of, ctx.control.zk, topology_id)
    if t is None:
        raise NotFoundError(f"no teardown of {topology_id!r} (not killed, or its kill wait "
                            "is not over)")
    return views.teardown_view(t)


@router.get("/topologies/{topology_id}", tags=["topologies"],
            summary="A topology: spec, status, assignment and statistics",
            response_model=responses.TopologyView)
async def get_topology(ctx: Ctx, topology_id: TopologyId, response: Response
                       ) -> dict[str, Any]:
    v = await ctx.view(topology_id)
    response.headers["ETag"] = f'"{v["version"]}"'
    return v


@router.post("/topologies/{topology_id}/activate", tags=["topologies"], **WRITE,
             summary="Activate: spouts emit", response_model=responses.TopologyView)
async def activate(ctx: Ctx, topology_id: TopologyId, if_match: IfMatch = None
                   ) -> dict[str, Any]:
    return await ctx.operate(topology_id, "activate", if_match)


@router.post("/topologies/{topology_id}/deactivate", tags=["topologies"], **WRITE,
             summary="Deactivate: spouts stop emitting; trees in flight complete",
             response_model=responses.TopologyView)
async def deactivate(ctx: Ctx, topology_id: TopologyId, if_match: IfMatch = None
                     ) -> dict[str, Any]:
    return await ctx.operate(topology_id, "deactivate", if_match)


@router.post("/topologies/{topology_id}/rebalance", tags=["topologies"], **WRITE,
             summary="Rebalance: drain for wait_s, then apply new spout parallelism",
             response_model=responses.TopologyView)
async def rebalance(ctx: Ctx, topology_id: TopologyId,
                    body: Annotated[RebalanceRequest | None, Body()] = None,
                    if_match: IfMatch = None) -> dict[str, Any]:
    b = body or RebalanceRequest(wait_s=None)
    return await ctx.operate(topology_id, "rebalance", if_match, b.wait_s, b.parallelism)


@router.post("/topologies/{topology_id}/kill", tags=["topologies"], **WRITE,
             summary="Kill: spouts stop, trees drain for wait_s, then it is removed",
             response_model=responses.TopologyView)
async def kill(ctx: Ctx, topology_id: TopologyId,
               body: Annotated[KillRequest | None, Body()] = None,
               if_match: IfMatch = None) -> dict[str, Any]:
    b = body or KillRequest(wait_s=None, purge_state=False)
    return await ctx.operate(topology_id, "kill", if_match, b.wait_s, purge_state=b.purge_state)


@router.get("/workers", tags=["cluster"], summary="Live workers and what they run",
            response_model=list[responses.WorkerView])
async def workers(ctx: Ctx) -> list[dict[str, Any]]:
    ws = await ctx.workers()
    assigned = await ctx.assignments()
    return [{"id": w.worker.id, "kind": str(w.worker.kind), "capacity": w.worker.capacity,
             "host": w.host, "pid": w.pid, "started_ms": w.started_ms,
             "running": list(w.endpoints),
             "placements": [p.to_dict() for p in assigned.get(
                 w.worker.id, WorkerAssignment()).placements]} for w in ws]
