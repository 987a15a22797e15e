"""What every route needs, injected with ``Annotated[..., Depends()]``.

One :class:`ApiContext` per app, kept in ``app.state``: the ZooKeeper control, the settings,
the metrics. The helpers here read it the same way for every router (blocking ZooKeeper
calls run on a thread, so the event loop keeps serving).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry

from services.api import views
from services.api.cluster_view import ClusterView
from services.api.control import Control
from services.api.errors import WRITE_ERRORS, NoToken, RoleTooLow, WrongToken
from services.api.lag import LagMonitor
from services.api.metrics import ApiMetrics
from services.api.roles import Role, role_of
from services.api.settings import ApiSettings
from services.api.storm_views import Numbers
from squall.core.control.cluster import TopologyRecord, WorkerInfo
from squall.core.errors import UsageError
from squall.core.topology.model import TopologySpec


def topology_id_of(request: Request, topology_id: Annotated[str, Path(
        pattern=r"^[A-Za-z0-9._-]{1,200}$",
        description="a topology's id, or the name of a live topology")]) -> str:
    """The id a route's ``topology_id`` names (Storm's CLI takes names, its UI ids)."""
    ctx: ApiContext = request.app.state.squall
    if ctx.cluster.ready:
        records = ctx.cluster.records()
        if any(r.id == topology_id for r in records):
            return topology_id
        named = [r.id for r in records if r.display_name == topology_id]
        if len(named) == 1:
            return named[0]
    return ctx.control.resolve(topology_id)


#: A route's topology: its id, or the name of a live topology, resolved to the id.
TopologyId = Annotated[str, Depends(topology_id_of)]
Wait = Annotated[float, Path(ge=0, le=86_400, description="seconds to let trees drain")]
IfMatch = Annotated[str | None, Header(description="expected version (409 if stale)")]
_bearer = HTTPBearer(auto_error=False)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


@dataclass(frozen=True)
class ApiContext:
    control: Control
    settings: ApiSettings
    registry: CollectorRegistry
    metrics: ApiMetrics
    #: the in-memory cluster the read routes serve (services/api/cluster_view.py)
    cluster: ClusterView
    #: the spouts' lag, read from Kafka (services/api/lag.py)
    lag: LagMonitor
    #: one replay of a topology's dead letters at a time (services/api/routes/messages.py)
    replaying: dict[str, asyncio.Lock] = field(default_factory=dict)

    def now(self) -> int:
        return self.control.clock.now_ms()

    # ----- reads: from memory once the mirrors have loaded, from ZooKeeper before -----

    async def records(self) -> list[TopologyRecord]:
        if self.cluster.ready:
            return self.cluster.records()
        return await asyncio.to_thread(self.control.store.list)

    async def record(self, tid: str) -> TopologyRecord:
        rec = self.cluster.record(tid) if self.cluster.ready else None
        return rec if rec is not None else await asyncio.to_thread(self.control.store.get,
                                                                   tid)

    async def workers(self) -> list[WorkerInfo]:
        if self.cluster.ready:
            return self.cluster.workers()
        return await asyncio.to_thread(self.control.workers)

    async def assignments(self) -> dict[str, Any]:
        if self.cluster.ready:
            return self.cluster.assignments()
        return await asyncio.to_thread(self.control.assignments)

    async def stats_of(self, tid: str) -> dict[str, Any]:
        """As of the last background scrape (every few seconds)."""
        return self.cluster.stats_of(tid)

    async def numbers_of(self, tid: str) -> Numbers:
        """What the Storm routes show of a topology: sums, windows, per process."""
        return Numbers(self.cluster.stats_of(tid), self.cluster.windows_of(tid, self.now()),
                       self.cluster.endpoint_stats_of(tid), self.cluster.errors_of(tid),
                       self.cluster.endpoint_windows_of(tid, self.now()))

    async def restarts_of(self, tid: str) -> dict[str, views.Health]:
        return views.restarts_of(tid, await self.workers())

    async def view(self, tid: str) -> dict[str, Any]:
        rec = await self.record(tid)
        grafana = self.settings.grafana_url
        links = {"spark_ui": self.cluster.spark_ui_of(rec.id),
                 "grafana": f"{grafana.rstrip('/')}/d/squall-topology?var-topology={rec.id}"
                 if grafana else None}
        return views.topology_view(rec, self.now(), await self.assignments(),
                                   await self.stats_of(tid), links)

    async def operate(self, tid: str, event: str, if_match: str | None,
                      wait_s: float | None = None,
                      parallelism: dict[str, int] | None = None,
                      purge_state: bool = False) -> dict[str, Any]:
        """Apply a lifecycle event; the topology's view after it."""
        rec = await asyncio.to_thread(self.control.operate, tid, event, wait_s, parallelism,
                                      _version_of(if_match), purge_state)
        await asyncio.to_thread(self.cluster.settle, tid, rec.version)
        return views.topology_view(rec, self.now(), await self.assignments())

    async def submit(self, spec: TopologySpec, activate: bool, keep_state: str | None = None
                     ) -> TopologyRecord:
        rec = await asyncio.to_thread(self.control.submit, spec, activate, keep_state)
        await asyncio.to_thread(self.cluster.settle, rec.id, rec.version)
        return rec


def _version_of(if_match: str | None) -> int | None:
    if if_match is None:
        return None
    try:
        return int(if_match.strip('"W/ '))
    except ValueError:
        raise UsageError(f"If-Match {if_match[:40]!r} is not a topology version (send the "
                         "ETag of GET /api/v1/topologies/<id>, e.g. \"3\")") from None


def _context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.squall
    return ctx


Ctx = Annotated[ApiContext, Depends(_context)]


def authorize(settings: ApiSettings, given: str | None, need: Role) -> Role | None:
    """The one token check: ``given`` is the bearer token sent (None: none); the caller's
    role, which must reach ``need`` (None: anonymous, on a development API without tokens)."""
    tokens = settings.tokens()
    if settings.allow_anonymous and not tokens:
        return None
    if given is None:
        raise NoToken("a bearer token is required for this route")
    role = role_of(tokens, given)
    if role is None:
        raise WrongToken("the bearer token is not valid")
    if role < need:
        raise RoleTooLow(f"the {role} role may not call this route: it needs the {need} "
                         "role's token")
    return role


def bearer_of(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header."""
    scheme, _, token = (header or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _operator(ctx: Ctx, cred: Credentials) -> None:
    authorize(ctx.settings, None if cred is None else cred.credentials, Role.OPERATOR)


def _admin(ctx: Ctx, cred: Credentials) -> None:
    authorize(ctx.settings, None if cred is None else cred.credentials, Role.ADMIN)


#: What every mutating route is declared with: the operator's token, and the error statuses.
WRITE: dict[str, Any] = {"dependencies": [Depends(_operator)], "responses": WRITE_ERRORS}
#: The submission's: the admin's token (it runs the topology's code on the workers).
SUBMIT: dict[str, Any] = {"dependencies": [Depends(_admin)], "responses": WRITE_ERRORS}
