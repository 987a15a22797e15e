"""The REST API: Storm UI's routes under ``/api/v1`` and clean routes of our own.

Errors are mapped to status codes in one place (:func:`_handlers`): a bad
spec 422, an unknown id 404, an illegal transition or a lost race 409,
ZooKeeper unavailable 503. Mutating routes need the bearer token. On a
replica that is not the leader, writes are forwarded to the leader.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
from fastapi import Body, Depends, FastAPI, Header, Path, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, Field

from services.api import page, views
from services.api.control import Control
from services.api.metrics import ApiMetrics
from services.api.settings import ApiSettings
from services.api.stats import aggregate, scrape
from squall import __version__
from squall.coord import ROOT
from squall.core.cluster import WorkerAssignment
from squall.core.errors import (
    AuthError,
    ConflictError,
    CoordinationError,
    NotFoundError,
    NotLeader,
    SquallError,
    TopologyError,
)
from squall.core.topology import TopologySpec

_MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
_FORWARDED = "x-squall-forwarded-by"
TopologyId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,200}$", description="topology id")]
Wait = Annotated[float, Path(ge=0, le=86_400, description="seconds to let trees drain")]
IfMatch = Annotated[str | None, Header(description="expected version (409 if stale)")]
_bearer = HTTPBearer(auto_error=False)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


class RebalanceRequest(BaseModel):
    wait_s: float | None = Field(None, ge=0, le=86_400,
                                 description="drain time (default: the message timeout)")
    parallelism: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=dict, description="new parallelism per spout")


class KillRequest(BaseModel):
    wait_s: float | None = Field(None, ge=0, le=86_400,
                                 description="drain time (default: the message timeout)")


class StormRebalanceOptions(BaseModel):
    executors: dict[str, Annotated[int, Field(ge=1, le=1024)]] = Field(default_factory=dict)


class StormRebalance(BaseModel):
    rebalanceOptions: StormRebalanceOptions = Field(default_factory=StormRebalanceOptions)


def _error(status: int, kind: str, detail: str, headers: dict[str, str] | None = None
           ) -> JSONResponse:
    return JSONResponse({"error": kind, "detail": detail}, status, headers=headers)


def _handlers(app: FastAPI) -> None:
    status = {TopologyError: 422, NotFoundError: 404, ConflictError: 409,
              CoordinationError: 503}

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, NotLeader):
            return _error(503, "not_leader", str(exc),
                          {"X-Squall-Leader": exc.leader} if exc.leader else None)
        code = next((c for t, c in status.items() if isinstance(exc, t)), 400)
        return _error(code, type(exc).__name__, str(exc))

    app.add_exception_handler(SquallError, handle)


def create_app(control: Control, settings: ApiSettings) -> FastAPI:
    app = FastAPI(
        title="Squall", version=__version__,
        description="Topology control for Squall: Storm's guaranteed message processing on "
        "Kafka and Spark. Storm UI's REST routes are under /api/v1; mutating routes need "
        "`Authorization: Bearer <token>`.")
    _handlers(app)
    registry = CollectorRegistry()
    metrics = ApiMetrics(registry, control)
    token = settings.token.get_secret_value() if settings.token else None

    def authorized(cred: Credentials) -> None:
        if settings.allow_anonymous and token is None:
            return
        if cred is None:
            raise AuthError(401, "a bearer token is required for this route")
        if token is None or not secrets.compare_digest(cred.credentials.encode(),
                                                       token.encode()):
            raise AuthError(403, "the bearer token is not valid")

    write = [Depends(authorized)]

    @app.exception_handler(AuthError)
    async def _unauth(_r: Request, exc: AuthError) -> JSONResponse:
        return _error(exc.status, "unauthorized", exc.detail,
                      {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None)

    @app.middleware("http")
    async def count_requests(request: Request, call_next: Any) -> Response:
        t0 = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        # The route's template, never the raw path: labels stay bounded.
        name = getattr(route, "path", "unmatched")
        metrics.requests.labels(request.method, name, str(response.status_code)).inc()
        metrics.latency.labels(request.method, name).observe(time.perf_counter() - t0)
        return response

    @app.middleware("http")
    async def forward_writes(request: Request, call_next: Any) -> Response:
        """A follower forwards writes to the leader (once: no loops)."""
        if (request.method not in _MUTATING or control.state != "CONNECTED"
                or control.leading.is_set()):
            return await call_next(request)  # type: ignore[no-any-return]
        leader = await asyncio.to_thread(control.leader_url)
        if leader is None or leader == settings.url or _FORWARDED in request.headers:
            return _error(503, "not_leader", f"this replica ({settings.url}) is not the leader "
                          f"and cannot forward (leader: {leader or 'none elected yet'})")
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("authorization", "content-type", "if-match")}
        headers[_FORWARDED] = settings.url
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                r = await client.request(request.method, leader + request.url.path,
                                         params=request.query_params,
                                         content=await request.body(), headers=headers)
        except httpx.HTTPError as e:
            return _error(503, "not_leader", f"the leader {leader} did not answer: {e}",
                          {"X-Squall-Leader": leader})
        return Response(r.content, r.status_code, media_type=r.headers.get("content-type"),
                        headers={"X-Squall-Leader": leader})

    # ----- helpers -----------------------------------------------------------

    def now() -> int:
        return control.clock.now_ms()

    async def stats_of(tid: str) -> dict[str, Any]:
        workers = await asyncio.to_thread(control.workers)
        samples, _ = await asyncio.to_thread(scrape, views.endpoints_of(tid, workers),
                                             settings.scrape_timeout_s)
        return aggregate(samples, tid)

    async def restarts_of(tid: str) -> dict[str, tuple[int, bool]]:
        return views.restarts_of(tid, await asyncio.to_thread(control.workers))

    def version_of(if_match: str | None) -> int | None:
        if if_match is None:
            return None
        try:
            return int(if_match.strip('"W/ '))
        except ValueError:
            raise ConflictError(f"If-Match {if_match!r} is not a topology version") from None

    async def view(tid: str, with_stats: bool = True) -> dict[str, Any]:
        rec = await asyncio.to_thread(control.store.get, tid)
        assignments = await asyncio.to_thread(control.assignments)
        st = await stats_of(tid) if with_stats else {}
        return views.topology_view(rec, now(), assignments, st)

    # ----- health ------------------------------------------------------------

    @app.get("/healthz", tags=["health"], summary="Liveness")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: ZooKeeper and Kafka reachable")
    async def readyz() -> JSONResponse:
        checks = {"zookeeper": control.state == "CONNECTED" and bool(
            await asyncio.to_thread(_exists, control, ROOT)),
            "kafka": await asyncio.to_thread(_kafka_ok, settings.bootstrap_servers)}
        ok = all(checks.values())
        return JSONResponse({"ready": ok, "checks": {k: "ok" if v else "unavailable"
                                                     for k, v in checks.items()},
                             "leader": control.leading.is_set()}, 200 if ok else 503)

    @app.get("/metrics", tags=["health"], summary="Prometheus metrics of this replica",
             response_class=PlainTextResponse)
    async def prometheus_metrics() -> PlainTextResponse:
        body = await asyncio.to_thread(generate_latest, registry)
        return PlainTextResponse(body, media_type=CONTENT_TYPE_LATEST)

    @app.get("/sd/prometheus", tags=["health"],
             summary="Prometheus HTTP service discovery: every worker process's /metrics")
    async def service_discovery() -> list[dict[str, Any]]:
        ws = await asyncio.to_thread(control.workers)
        out = []
        for w in ws:
            for url in sorted({e["url"] for e in w.endpoints}):
                u = urlsplit(url)
                out.append({"targets": [u.netloc], "labels": {
                    "__metrics_path__": u.path or "/metrics", "worker": w.worker.id,
                    "worker_kind": str(w.worker.kind)}})
        return out

    # ----- our own routes ------------------------------------------------------

    spec_body = {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"type": "object", "description":
                                        "the topology (see README.md, \"Topologies and bolts\")"}},
        "application/yaml": {"schema": {"type": "string"}}}}}

    @app.post("/topologies", tags=["topologies"], status_code=201, dependencies=write,
              summary="Submit a topology (JSON or YAML)", openapi_extra=spec_body)
    async def submit(request: Request, activate: bool = True) -> dict[str, Any]:
        raw = await request.body()
        ctype = request.headers.get("content-type", "application/json").split(";")[0].strip()
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            raise TopologyError("the body is not UTF-8 text") from None
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml", "text/plain"):
            spec = TopologySpec.from_text(text)
        else:
            try:
                doc = json.loads(text)
            except ValueError as e:
                raise TopologyError(f"the body is not valid JSON: {e}") from None
            spec = TopologySpec.from_dict(doc)
        rec = await asyncio.to_thread(control.submit, spec, activate)
        return views.topology_view(rec, now(), {}, {})

    @app.get("/topologies", tags=["topologies"], summary="Every topology with its status")
    async def list_topologies() -> list[dict[str, Any]]:
        recs = await asyncio.to_thread(control.store.list)
        return [{"id": r.id, "status": str(r.lifecycle.status), "version": r.version,
                 "uptime_s": views.uptime_s(r, now())} for r in recs]

    @app.get("/topologies/{topology_id}", tags=["topologies"],
             summary="A topology: spec, status, assignment and statistics")
    async def get_topology(topology_id: TopologyId, response: Response) -> dict[str, Any]:
        v = await view(topology_id)
        response.headers["ETag"] = f'"{v["version"]}"'
        return v

    async def op(tid: str, event: str, if_match: str | None, wait_s: float | None = None,
                 parallelism: dict[str, int] | None = None) -> dict[str, Any]:
        rec = await asyncio.to_thread(control.operate, tid, event, wait_s, parallelism,
                                      version_of(if_match))
        return views.topology_view(rec, now(), await asyncio.to_thread(control.assignments))

    @app.post("/topologies/{topology_id}/activate", tags=["topologies"], dependencies=write,
              summary="Activate: spouts emit")
    async def activate_(topology_id: TopologyId, if_match: IfMatch = None) -> dict[str, Any]:
        return await op(topology_id, "activate", if_match)

    @app.post("/topologies/{topology_id}/deactivate", tags=["topologies"], dependencies=write,
              summary="Deactivate: spouts stop emitting; trees in flight complete")
    async def deactivate_(topology_id: TopologyId, if_match: IfMatch = None) -> dict[str, Any]:
        return await op(topology_id, "deactivate", if_match)

    @app.post("/topologies/{topology_id}/rebalance", tags=["topologies"], dependencies=write,
              summary="Rebalance: drain for wait_s, then apply new spout parallelism")
    async def rebalance_(topology_id: TopologyId,
                         body: Annotated[RebalanceRequest | None, Body()] = None,
                         if_match: IfMatch = None) -> dict[str, Any]:
        b = body or RebalanceRequest(wait_s=None)
        return await op(topology_id, "rebalance", if_match, b.wait_s, b.parallelism)

    @app.post("/topologies/{topology_id}/kill", tags=["topologies"], dependencies=write,
              summary="Kill: spouts stop, trees drain for wait_s, then it is removed")
    async def kill_(topology_id: TopologyId, body: Annotated[KillRequest | None, Body()] = None,
                    if_match: IfMatch = None) -> dict[str, Any]:
        return await op(topology_id, "kill", if_match, (body or KillRequest(wait_s=None)).wait_s)

    @app.get("/workers", tags=["cluster"], summary="Live workers and what they run")
    async def workers() -> list[dict[str, Any]]:
        ws = await asyncio.to_thread(control.workers)
        assigned = await asyncio.to_thread(control.assignments)
        return [{"id": w.worker.id, "kind": str(w.worker.kind), "capacity": w.worker.capacity,
                 "host": w.host, "pid": w.pid, "started_ms": w.started_ms,
                 "running": list(w.endpoints),
                 "placements": [p.to_dict() for p in assigned.get(
                     w.worker.id, WorkerAssignment()).placements]} for w in ws]

    # ----- the topology page ------------------------------------------------

    @app.get("/ui", tags=["ui"], summary="Topologies, with links to their pages",
             response_class=HTMLResponse)
    async def ui_index() -> HTMLResponse:
        recs = await asyncio.to_thread(control.store.list)
        return HTMLResponse(page.index_page([r.id for r in recs]))

    @app.get("/ui/topologies/{topology_id}", tags=["ui"], response_class=HTMLResponse,
             summary="The topology's DAG with live per-component numbers")
    async def ui_topology(topology_id: TopologyId) -> HTMLResponse:
        await asyncio.to_thread(control.store.get, topology_id)  # 404 for an unknown id
        return HTMLResponse(page.topology_page(topology_id))

    # ----- Storm UI's routes -------------------------------------------------

    @app.get("/api/v1/cluster/summary", tags=["storm"], summary="Cluster summary")
    async def cluster_summary() -> dict[str, Any]:
        ws = await asyncio.to_thread(control.workers)
        recs = await asyncio.to_thread(control.store.list)
        assigned = await asyncio.to_thread(control.assignments)
        used = sum(len(p.tasks) or 1 for a in assigned.values() for p in a.placements)
        total = sum(w.worker.capacity for w in ws)
        return {"squallVersion": __version__, "supervisors": len(ws), "slotsTotal": total,
                "slotsUsed": used, "slotsFree": max(0, total - used), "topologies": len(recs),
                "tasksTotal": sum(r.spec.num_tasks for r in recs),
                "leader": await asyncio.to_thread(control.leader_url),
                "thisReplicaLeads": control.leading.is_set(), "zookeeper": control.state,
                # Known to the leader: tasks no live worker of their kind has room for.
                "unassignedTasks": [u.key for u in control.unassigned]
                if control.leading.is_set() else None}

    @app.get("/api/v1/supervisor/summary", tags=["storm"], summary="Workers (supervisors)")
    async def supervisor_summary() -> dict[str, Any]:
        ws = await asyncio.to_thread(control.workers)
        return {"supervisors": [{"id": w.worker.id, "host": w.host, "kind": str(w.worker.kind),
                                 "slotsTotal": w.worker.capacity,
                                 "uptimeSeconds": max(0, (now() - w.started_ms) // 1000)}
                                for w in ws]}

    @app.get("/api/v1/topology/summary", tags=["storm"], summary="Every topology")
    async def topology_summary() -> dict[str, Any]:
        recs = await asyncio.to_thread(control.store.list)
        return {"topologies": [
            {"id": r.id, "name": r.spec.name, "status": str(r.lifecycle.status),
             "uptimeSeconds": int(views.uptime_s(r, now())),
             "tasksTotal": r.spec.num_tasks, "executorsTotal": r.spec.num_tasks}
            for r in recs]}

    @app.get("/api/v1/topology/{topology_id}", tags=["storm"],
             summary="A topology with its statistics (window :all-time)")
    async def storm_topology(topology_id: TopologyId) -> dict[str, Any]:
        rec = await asyncio.to_thread(control.store.get, topology_id)
        return views.storm_topology(rec, now(), await asyncio.to_thread(control.assignments),
                                    await stats_of(topology_id), await restarts_of(topology_id))

    @app.get("/api/v1/topology/{topology_id}/component/{component}", tags=["storm"],
             summary="A component (spout, bolt or __acker)")
    async def storm_component(topology_id: TopologyId,
                              component: Annotated[str, Path(max_length=200)]) -> dict[str, Any]:
        rec = await asyncio.to_thread(control.store.get, topology_id)
        return views.storm_component(rec, component, now(),
                                     await asyncio.to_thread(control.assignments),
                                     await stats_of(topology_id),
                                     await restarts_of(topology_id))

    async def storm_op(tid: str, event: str, wait: float | None = None,
                       parallelism: dict[str, int] | None = None) -> dict[str, Any]:
        await op(tid, event, None, wait, parallelism)
        return {"topologyOperation": event, "topologyId": tid, "status": "success"}

    @app.post("/api/v1/topology/{topology_id}/activate", tags=["storm"], dependencies=write)
    async def storm_activate(topology_id: TopologyId) -> dict[str, Any]:
        return await storm_op(topology_id, "activate")

    @app.post("/api/v1/topology/{topology_id}/deactivate", tags=["storm"], dependencies=write)
    async def storm_deactivate(topology_id: TopologyId) -> dict[str, Any]:
        return await storm_op(topology_id, "deactivate")

    @app.post("/api/v1/topology/{topology_id}/rebalance/{wait_time}", tags=["storm"],
              dependencies=write)
    async def storm_rebalance(topology_id: TopologyId, wait_time: Wait,
                              body: Annotated[StormRebalance | None, Body()] = None
                              ) -> dict[str, Any]:
        ex = body.rebalanceOptions.executors if body else {}
        return await storm_op(topology_id, "rebalance", wait_time, ex)

    @app.post("/api/v1/topology/{topology_id}/kill/{wait_time}", tags=["storm"],
              dependencies=write)
    async def storm_kill(topology_id: TopologyId, wait_time: Wait) -> dict[str, Any]:
        return await storm_op(topology_id, "kill", wait_time)

    return app


def _exists(control: Control, path: str) -> bool:
    try:
        return control.zk.exists(path) is not None
    except Exception:
        return False


def _kafka_ok(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined,unused-ignore]

    from squall.kafka import quiet_logger

    try:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": 2000,
                                "logger": quiet_logger("readyz")}
        AdminClient(conf).list_topics(timeout=2)
        return True
    except Exception:
        return False
