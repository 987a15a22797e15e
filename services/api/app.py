"""The REST API: Storm UI's routes under ``/api/v1`` and clean routes of our own.

:func:`create_app` only assembles: the routers (``routes/``), the one error mapping
(``errors.py``), the middleware (``middleware.py``) and the context every route receives
through ``Depends`` (``context.py``). Mutating routes need the bearer token; on a replica
that is not the leader, writes are forwarded to the leader.
"""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from services.api import errors, middleware
from services.api.cluster_view import ClusterView
from services.api.context import ApiContext
from services.api.control import Control
from services.api.lag import LagMonitor
from services.api.metrics import ApiMetrics
from services.api.routes import diagnostics, health, messages, storm, topologies, ui
from services.api.settings import ApiSettings
from services.telemetry import bearer
from squall import __version__
from squall.coord import ELECTION


def create_app(control: Control, settings: ApiSettings) -> FastAPI:
    app = FastAPI(
        title="Squall", version=__version__,
        description="Topology control for Squall: Storm's guaranteed message processing on "
        "Kafka and Spark. Storm UI's REST routes are under /api/v1; mutating routes need "
        "`Authorization: Bearer <token>`.")
    registry = CollectorRegistry()
    cluster = ClusterView(control.zk, ELECTION, control.clock.now_ms,
                          settings.stats_interval_s, settings.scrape_timeout_s,
                          bearer(settings.telemetry_token))
    lag = LagMonitor(settings.clients,
                     lambda: cluster.records() if cluster.ready else control.store.list(),
                     control.leading.is_set, control.clock.now_ms, settings.lag_interval_s)
    registry.register(lag)
    ctx = ApiContext(control, settings, registry, ApiMetrics(registry, control), cluster, lag)
    app.state.squall = ctx
    errors.install(app)
    middleware.install(app, ctx)
    for r in (health.router, topologies.router, messages.router, diagnostics.router, ui.router,
              storm.router):
        app.include_router(r)
    app.router.add_event_handler("startup", lag.start)
    app.router.add_event_handler("shutdown", cluster.close)
    app.router.add_event_handler("shutdown", lag.close)
    return app
