"""Storm UI's REST routes under ``/api/v1``, in Storm's names."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from services.api import (
    storm_component,
    storm_streams,
    storm_views,
    storm_visualization,
    views,
)
from services.api import storm_component_responses as scr
from services.api import storm_responses as sr
from services.api.context import WRITE, ApiContext, Ctx, TopologyId, Wait
from services.api.errors import READ_ERRORS, documented, error_response
from squall import __version__
from squall.core.control import lag as source_lag
from squall.core.errors import NotFoundError, TopologyError, UsageError

router = APIRouter(prefix="/api/v1", tags=["storm"], responses=READ_ERRORS)


#: Storm's ``window`` parameter: one of its rolling windows, in seconds, or ``:all-time``.
WindowParam = Annotated[Literal["600", "10800", "86400", ":all-time"], Query(
    description="the statistics' window: 600, 10800 or 86400 seconds (what this API "
    "replica has seen of them), or :all-time (the processes' lifetime)")]
SysParam = Annotated[bool, Query(description="show system components (__acker) among the "
                                 "bolts, as Storm does")]


class StormRebalanceOptions(BaseModel):
    executors: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(default_factory=dict)
    numWorkers: int | None = Field(default=None, description="refused: Squall's worker processes "
                                   "are its services, scaled by starting or stopping them")


class StormRebalance(BaseModel):
    rebalanceOptions: StormRebalanceOptions = Field(default_factory=StormRebalanceOptions)


#: Storm's resource-aware scheduler's figures: Squall schedules tasks, not memory or CPU,
#: so they are zero and ``schedulerDisplayResource`` is false (docs/storm-migration.md).
NO_RESOURCES: dict[str, Any] = {"schedulerDisplayResource": False}


@router.get("/cluster/summary", summary="Cluster summary", response_model=sr.ClusterSummary)
async def cluster_summary(ctx: Ctx) -> dict[str, Any]:
    control = ctx.control
    ws = await ctx.workers()
    recs = await ctx.records()
    assigned = await ctx.assignments()
    used = sum(len(p.tasks) or 1 for a in assigned.values() for p in a.placements)
    total = sum(w.worker.capacity for w in ws)
    tasks = sum(r.spec.num_tasks for r in recs)
    return {"stormVersion": __version__, "squallVersion": __version__,
            "supervisors": len(ws), "slotsTotal": total,
            "slotsUsed": used, "slotsFree": max(0, total - used), "topologies": len(recs),
            "executorsTotal": tasks, "tasksTotal": tasks, **NO_RESOURCES,
            "totalMem": 0.0, "totalCpu": 0.0, "availMem": 0.0, "availCPU": 0.0,
            "memAssignedPercentUtil": 0.0, "cpuAssignedPercentUtil": 0.0,
            "leader": ctx.cluster.leader_url() if ctx.cluster.ready else
            await asyncio.to_thread(control.leader_url),
            "thisReplicaLeads": control.leading.is_set(), "zookeeper": control.state,
            # Known to the leader: tasks no live worker of their kind has room for.
            "unassignedTasks": [u.key for u in control.unassigned]
            if control.leading.is_set() else None}


@router.get("/nimbus/summary", summary="The API replicas (Storm's nimbuses), the leader first",
            response_model=sr.NimbusSummary)
async def nimbus_summary(ctx: Ctx) -> dict[str, Any]:
    control = ctx.control
    contenders = ctx.cluster.contenders() if ctx.cluster.ready else []
    return views.nimbus_summary(contenders, control.s.url, control.started_ms, ctx.now())


@router.get("/supervisor/summary", summary="Workers (supervisors)",
            response_model=sr.SupervisorSummary)
async def supervisor_summary(ctx: Ctx) -> dict[str, Any]:
    ws = await ctx.workers()
    assigned = await ctx.assignments()
    out = []
    for w in ws:
        up = max(0, (ctx.now() - w.started_ms) // 1000)
        a = assigned.get(w.worker.id)
        used = sum(len(p.tasks) or 1 for p in a.placements) if a else 0
        out.append({"id": w.worker.id, "host": w.host, "kind": str(w.worker.kind),
                    "uptime": views.pretty_uptime(up), "uptimeSeconds": up,
                    "slotsTotal": w.worker.capacity, "slotsUsed": used, "totalMem": 0.0,
                    "totalCpu": 0.0, "usedMem": 0.0, "usedCPU": 0.0, "version": __version__})
    return {"supervisors": out, **NO_RESOURCES}


@router.get("/supervisor", summary="A supervisor by id, or those on a host, with their "
            "workers (processes)", responses=documented(400, 404, 422, 503),
            response_model=sr.SupervisorPage)
async def supervisor(ctx: Ctx,
                     sid: Annotated[str | None, Query(alias="id", max_length=200)] = None,
                     host: Annotated[str | None, Query(max_length=255)] = None,
                     sys: SysParam = False) -> dict[str, Any]:
    if sid is None and host is None:
        raise UsageError("give a supervisor's id (?id=) or a host (?host=), as Storm does")
    everyone = (await supervisor_summary(ctx))["supervisors"]
    chosen = [s for s in everyone if s["id"] == sid] if sid is not None else \
        [s for s in everyone if s["host"] == host]
    if not chosen:
        which = f"id {sid!r}" if sid is not None else f"on host {host!r}"
        raise NotFoundError(f"no supervisor {which}")
    ids = {s["id"] for s in chosen}
    ws = [w for w in await ctx.workers() if w.worker.id in ids]
    assigned = await ctx.assignments()
    procs = [p for r in await ctx.records()
             for p in storm_views.storm_workers(r, ws, assigned, ctx.now())]
    return {"supervisors": chosen, "workers": procs, **NO_RESOURCES}


@router.get("/history/summary", summary="Every topology's id (Storm: the caller's)",
            response_model=sr.HistorySummary)
async def history_summary(ctx: Ctx) -> dict[str, Any]:
    return {"topo-history": sorted(r.id for r in await ctx.records())}


@router.get("/cluster/configuration", summary="The cluster's settings, in Storm's names",
            response_model=sr.ClusterConfiguration)
async def cluster_configuration(ctx: Ctx) -> dict[str, Any]:
    s = ctx.settings
    return {"storm.zookeeper.servers": s.zookeeper.split(","),
            "nimbus.seeds": [c.url for c in ctx.cluster.contenders()] if ctx.cluster.ready
            else [s.url],
            "ui.port": s.port, "topology.message.timeout.secs": 30,
            "topology.max.spout.pending": 10_000, "topology.acker.executors": 1,
            "squall.kafka.bootstrap.servers": s.bootstrap_servers,
            # the user's client properties, secrets redacted
            **{f"squall.kafka.{k}": v for k, v in s.kafka.redacted().items()},
            "squall.stats.interval.secs": s.stats_interval_s}


@router.get("/topology-workers/{topology_id}",
            summary="Where a topology's processes run (host and metrics port)",
            response_model=sr.TopologyWorkers)
async def topology_workers(ctx: Ctx, topology_id: TopologyId) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    procs = storm_views.storm_workers(rec, await ctx.workers(), await ctx.assignments(),
                                      ctx.now())
    return {"hostPortList": [{"host": p["host"], "port": p["port"]} for p in procs],
            "logviewerPort": 0}


@router.get("/topology/{topology_id}/metrics",
            summary="Each component's numbers by stream (Storm's shape)",
            response_model=scr.TopologyMetrics)
async def storm_metrics(ctx: Ctx, topology_id: TopologyId, window: WindowParam = ":all-time",
                        sys: Annotated[bool, Query(description="accepted as Storm does; "
                                                   "system streams are not counted apart "
                                                   "here")] = False) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    return storm_streams.topology_metrics(rec, ctx.now(), await ctx.assignments(),
                                          await ctx.numbers_of(topology_id),
                                          await ctx.workers(), window)


@router.get("/topology/summary", summary="Every topology", response_model=sr.TopologySummary)
async def topology_summary(ctx: Ctx) -> dict[str, Any]:
    recs = await ctx.records()
    # Storm's workers are processes here: each topology's, counted in one pass.
    procs: dict[str, set[str]] = {}
    for w in await ctx.workers():
        for e in w.endpoints:
            if e.get("topology"):
                procs.setdefault(str(e["topology"]), set()).add(str(e.get("url", "")))
    now = ctx.now()
    out = []
    for r in recs:  # dashboards poll this: nothing here costs more than a lookup
        up = int(views.uptime_s(r, now))
        out.append({"id": r.id, "name": r.display_name, "status": str(r.lifecycle.status),
                    "uptime": views.pretty_uptime(up), "uptimeSeconds": up,
                    "tasksTotal": r.spec.num_tasks, "executorsTotal": r.spec.num_executors,
                    "workersTotal": len(procs.get(r.id, ())), "replicationCount": 1})
    return {"topologies": out, "schedulerDisplayResource": False}


@router.get("/topology/{topology_id}", summary="A topology with its statistics",
            response_model=sr.TopologyPage)
async def storm_topology(ctx: Ctx, topology_id: TopologyId, window: WindowParam = ":all-time",
                         sys: SysParam = False) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    body = storm_views.storm_topology(rec, ctx.now(), await ctx.assignments(),
                                      await ctx.numbers_of(topology_id), await ctx.workers(),
                                      await ctx.restarts_of(topology_id), window)
    if sys:
        body["bolts"].append(storm_views.acker_bolt(body["acker"]))
    return body


@router.get("/topology/{topology_id}/lag",
            summary="Each spout's lag per topic and partition (Storm's shape)",
            response_model=scr.TopologyLag)
async def storm_lag(ctx: Ctx, topology_id: TopologyId) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    lags = await asyncio.to_thread(ctx.lag.of, rec)
    return source_lag.storm_lag([s.name for s in rec.spec.spouts], lags, ctx.now())


@router.get("/topology/{topology_id}/component/{component}",
            summary="A component (spout, bolt or __acker)", response_model=scr.ComponentPage)
async def component_page(ctx: Ctx, topology_id: TopologyId,
                         component: Annotated[str, Path(max_length=200)],
                         window: WindowParam = ":all-time",
                         sys: Annotated[bool, Query(description="accepted as Storm does; "
                                                    "system streams are not counted apart "
                                                    "here")] = False) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    return storm_component.storm_component(
        rec, component, ctx.now(), await ctx.assignments(), await ctx.numbers_of(topology_id),
        await ctx.workers(), await ctx.restarts_of(topology_id), window)


@router.get("/topology/{topology_id}/visualization",
            summary="The topology's graph as Storm's UI draws it (Storm's undocumented shape)",
            response_model=scr.Visualization)
async def visualization(ctx: Ctx, topology_id: TopologyId, window: WindowParam = ":all-time",
                        sys: SysParam = False) -> dict[str, Any]:
    rec = await ctx.record(topology_id)
    return storm_visualization.visualization(rec, ctx.now(), await ctx.assignments(),
                                             await ctx.numbers_of(topology_id),
                                             await ctx.workers(), window, sys)


async def _storm_op(ctx: ApiContext, tid: str, event: str, wait: float | None = None,
                    parallelism: dict[str, int] | None = None) -> dict[str, Any]:
    await ctx.operate(tid, event, None, wait, parallelism)
    return {"topologyOperation": event, "topologyId": tid, "status": "success"}


@router.post("/topology/{topology_id}/activate", **WRITE, response_model=sr.TopologyOperation)
async def storm_activate(ctx: Ctx, topology_id: TopologyId) -> dict[str, Any]:
    return await _storm_op(ctx, topology_id, "activate")


@router.post("/topology/{topology_id}/deactivate", **WRITE, response_model=sr.TopologyOperation)
async def storm_deactivate(ctx: Ctx, topology_id: TopologyId) -> dict[str, Any]:
    return await _storm_op(ctx, topology_id, "deactivate")


@router.post("/topology/{topology_id}/rebalance/{wait_time}", **WRITE,
             response_model=sr.TopologyOperation)
async def storm_rebalance(ctx: Ctx, topology_id: TopologyId, wait_time: Wait,
                          body: Annotated[StormRebalance | None, Body()] = None
                          ) -> dict[str, Any]:
    if body and body.rebalanceOptions.numWorkers is not None:
        raise TopologyError(
            f"rebalanceOptions.numWorkers ({body.rebalanceOptions.numWorkers}) has no meaning "
            "in Squall: workers are the spout, acker and bolts services, started and stopped "
            "as processes; rebalance changes a component's executors")
    ex = body.rebalanceOptions.executors if body else {}
    return await _storm_op(ctx, topology_id, "rebalance", wait_time, ex)


@router.post("/topology/{topology_id}/kill/{wait_time}", **WRITE,
             response_model=sr.TopologyOperation)
async def storm_kill(ctx: Ctx, topology_id: TopologyId, wait_time: Wait) -> dict[str, Any]:
    return await _storm_op(ctx, topology_id, "kill", wait_time)


#: Storm UI routes with nothing behind them here, and why (each answers 501 saying so).
NOT_HERE = {
    "/topology/{topology_id}/profiling/{rest:path}":
        "profiling and heap dumps: Squall's workers are Python and Spark processes; "
        "use py-spy on a worker, or Spark's UI for the bolts job",
    "/topology/{topology_id}/logconfig":
        "dynamic log levels: each service logs at INFO to its stderr",
    "/topology/{topology_id}/debug/{rest:path}":
        "event logging: read the topology's edge topics in Kafka instead",
    "/topology/{topology_id}/component/{component}/debug/{rest:path}":
        "event logging: read the component's edge topics in Kafka instead",
    "/logviewer/{rest:path}": "the logviewer: each service logs to stderr",
    "/uploadTopology": "jar upload: submit a topology spec (JSON or YAML) to "
                       "POST /api/v1/topologies",
    "/drpc/{rest:path}": "DRPC has no counterpart in Squall",
    "/owner-resources": "topology owners: topologies belong to the cluster, and resources "
                        "are not scheduled (see docs/storm-migration.md)",
    "/owner-resources/{owner}": "topology owners: topologies belong to the cluster",
}


def _not_here(why: str) -> Any:
    async def route() -> JSONResponse:
        return error_response(501, "not implemented", f"Squall has no {why}")
    return route


for _path, _why in NOT_HERE.items():
    router.add_api_route(_path, _not_here(_why), methods=["GET", "POST"],
                         include_in_schema=False)
