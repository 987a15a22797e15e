"""Liveness, readiness, this replica's metrics, and Prometheus service discovery."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from services.api.context import Ctx
from services.api.errors import documented
from services.api.responses import Liveness, Readiness, TargetGroup
from squall.coord import ROOT
from squall.kafka_clients import KafkaClients, quiet_logger

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness", response_model=Liveness)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: ZooKeeper and Kafka reachable",
            response_model=Readiness, responses={
                200: {"description": "ready"},
                503: {"description": "not ready: which check failed", "model": Readiness}})
async def readyz(ctx: Ctx) -> JSONResponse:
    control = ctx.control
    checks = {"zookeeper": control.state == "CONNECTED" and bool(
        await asyncio.to_thread(_exists, control.zk, ROOT)),
        "kafka": await asyncio.to_thread(_kafka_ok, ctx.settings.clients)}
    ok = all(checks.values())
    return JSONResponse({"ready": ok, "checks": {k: "ok" if v else "unavailable"
                                                 for k, v in checks.items()},
                         "leader": control.leading.is_set()}, 200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics of this replica",
            response_class=PlainTextResponse)
async def prometheus_metrics(ctx: Ctx) -> PlainTextResponse:
    body = await asyncio.to_thread(generate_latest, ctx.registry)
    return PlainTextResponse(body, media_type=CONTENT_TYPE_LATEST)


@router.get("/sd/prometheus", responses=documented(503),
            summary="Prometheus HTTP service discovery: every worker process's /metrics",
            response_model=list[TargetGroup])
async def service_discovery(ctx: Ctx) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for w in await ctx.workers():
        # One target per process: a process running several components lists one endpoint
        # each, and a worker's URL is never listed by another.
        kinds = {e["url"]: str(e.get("kind", "")) for e in reversed(w.endpoints)}
        for url in sorted(kinds.keys() - seen):
            seen.add(url)
            u = urlsplit(url)
            out.append({"targets": [u.netloc], "labels": {
                "__metrics_path__": u.path or "/metrics", "worker": w.worker.id,
                "worker_kind": str(w.worker.kind), "process": kinds[url]}})
    return out


def _exists(zk: Any, path: str) -> bool:
    try:
        return zk.exists(path) is not None
    except Exception:  # any ZooKeeper trouble means "not ready", never a 500
        return False


def _kafka_ok(kafka: KafkaClients) -> bool:
    try:
        kafka.admin({"socket.timeout.ms": 2000, "logger": quiet_logger("readyz")}
                    ).list_topics(timeout=2)
        return True
    except Exception:  # any broker trouble means "not ready"
        return False
