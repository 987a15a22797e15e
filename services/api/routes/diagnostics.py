"""Routes for a bad day: a topology's numbers over time (the topology page's charts), its
last errors, and its task processes' logs, fetched from the workers that run them
(``squall errors``, ``squall logs``)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Path, Query

from services.api import responses
from services.api.context import Ctx, TopologyId
from services.api.errors import READ_ERRORS
from squall.core.control.assignment import ACKER
from squall.core.control.history import rate_points
from squall.core.errors import NotFoundError, ProcessUnavailable

router = APIRouter(responses=READ_ERRORS, tags=["diagnostics"])


@router.get("/topologies/{topology_id}/errors", response_model=responses.TopologyErrors,
            summary="The last errors its processes reported, newest first")
async def errors(ctx: Ctx, topology_id: TopologyId,
                 component: Annotated[str | None, Query(max_length=200)] = None,
                 limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    now = ctx.now()
    got = [e for e in reversed(ctx.cluster.errors_of(rec.id))
           if component is None or e.report.component == component]
    return {"errors": [{"component": e.report.component, "task": e.report.task,
                        "time_ms": e.report.time_ms, "error": e.report.error, "host": e.host,
                        "port": e.port, "lapsed_s": max(0, (now - e.report.time_ms) // 1000)}
                       for e in got[:limit]]}


@router.get("/topologies/{topology_id}/history", response_model=responses.TopologyHistory,
            summary="Its spouts' rates, complete latency and lag over one of Storm's windows")
async def history(ctx: Ctx, topology_id: TopologyId,
                  window: Annotated[Literal["600", "10800", "86400"], Query(description=(
                      "Storm's windows: 10 minutes, 3 hours, 1 day"))] = "600"
                  ) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    now, seconds = ctx.now(), int(window)
    points = rate_points(ctx.cluster.series_of(rec.id, now, seconds),
                         {s.name for s in rec.spec.spouts})
    lag = [dataclasses.asdict(p) for p in ctx.lag.history(rec.id, now, seconds)]
    return {"window": window, "points": points, "lag": lag}


@router.get("/topologies/{topology_id}/logs/{component}", response_model=responses.ComponentLogs,
            summary="The log of each process that runs a component (its end, or from an "
            "offset)")
async def logs(ctx: Ctx, topology_id: TopologyId,
               component: Annotated[str, Path(max_length=200)],
               task: Annotated[int | None, Query(ge=0, le=1 << 20)] = None,
               process: Annotated[str | None, Query(max_length=250, description=(
                   "one process (as an earlier answer named it)"))] = None,
               offset: Annotated[int | None, Query(ge=0, description=(
                   "with process: from this byte on (an earlier answer's next)"))] = None,
               tail_bytes: Annotated[int, Query(ge=0, le=1 << 16)] = 8192) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    wanted = []
    for w in await ctx.workers():
        base = next((e["url"].removesuffix("/metrics") for e in w.endpoints
                     if e.get("kind") == "worker"), None)
        for e in w.endpoints:
            comp = ACKER if e.get("kind") == "acker" else e.get("component")
            if (e.get("topology") != rec.id or comp != component or not e.get("process")
                    or (task is not None and task not in e.get("tasks", ()))
                    or (process is not None and e["process"] != process)):
                continue
            if base is None:
                raise ProcessUnavailable(f"worker {w.worker.id} serves no logs (it runs without "
                                       "a metrics port)")
            wanted.append((w.worker.id, w.host, base, e))
    if not wanted:
        which = f" task {task}" if task is not None else ""
        raise NotFoundError(f"no process of {rec.id}/{component}{which} runs now"
                            + (f" named {process!r}" if process else ""))
    at = str(offset) if offset is not None and process is not None else str(-tail_bytes)
    timeout_s = ctx.settings.scrape_timeout_s * 5

    def fetch(worker: str, host: str, base: str, e: dict[str, Any]) -> dict[str, Any]:
        url = f"{base}/logs/{quote(str(e['process']), safe='')}/{at}"
        try:
            status, raw = ctx.cluster.fetch.get(url, host, timeout_s)
            body = json.loads(raw)
        except ProcessUnavailable as err:
            raise ProcessUnavailable(f"worker {worker} did not serve the log of "
                                     f"{e['process']}: {err}") from None
        except ValueError:
            raise ProcessUnavailable(f"worker {worker} answered the log of {e['process']} "
                                     "with something not JSON") from None
        if status != 200 or not isinstance(body, dict):
            said = body.get("error") if isinstance(body, dict) else None
            raise ProcessUnavailable(f"worker {worker}: {said or f'HTTP {status}'}")
        try:
            return {"worker": worker, "process": e["process"],
                    "tasks": list(e.get("tasks", ())),
                    **{k: body[k] for k in ("size", "offset", "next", "text")}}
        except KeyError as missing:
            raise ProcessUnavailable(f"worker {worker} answered the log of {e['process']} "
                                     f"without {missing}") from None

    chunks = await asyncio.gather(*(asyncio.to_thread(fetch, *x) for x in wanted))
    return {"component": component, "processes": sorted(chunks, key=lambda c: c["process"])}
