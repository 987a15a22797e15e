"""Around every request: count it by route template, and forward a follower's writes.

Middleware runs outside FastAPI's exception handlers: errors here become responses through
the same mapping (:func:`services.api.errors.to_response`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response

from services.api.context import ApiContext
from services.api.errors import to_response
from squall.core.errors import NotLeader

_MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
_FORWARDED = "x-squall-forwarded-by"


def install(app: FastAPI, ctx: ApiContext) -> None:
    @app.middleware("http")
    async def count_requests(request: Request, call_next: Any) -> Response:
        t0 = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        # The route's template, never the raw path: labels stay bounded.
        name = getattr(route, "path", "unmatched")
        ctx.metrics.requests.labels(request.method, name, str(response.status_code)).inc()
        ctx.metrics.latency.labels(request.method, name).observe(time.perf_counter() - t0)
        return response

    @app.middleware("http")
    async def forward_writes(request: Request, call_next: Any) -> Response:
        """A follower forwards writes to the leader (once: no loops)."""
        control, url = ctx.control, ctx.settings.url
        if (request.method not in _MUTATING or control.state != "CONNECTED"
                or control.leading.is_set()):
            return await call_next(request)  # type: ignore[no-any-return]
        leader = await asyncio.to_thread(control.leader_url)
        if leader is None or leader == url or _FORWARDED in request.headers:
            # The leader header only names a replica that can take the write.
            return to_response(NotLeader(
                None if leader == url else leader,
                f"this replica ({url}) is not the leader and cannot forward "
                f"(leader: {leader or 'none elected yet'})"))
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("authorization", "content-type", "if-match")}
        headers[_FORWARDED] = url
        try:
            async with httpx.AsyncClient(timeout=30) as client:
                r = await client.request(request.method, leader + request.url.path,
                                         params=request.query_params,
                                         content=await request.body(), headers=headers)
        except httpx.HTTPError as e:
            return to_response(NotLeader(leader, f"the leader {leader} did not answer: {e}"))
        return Response(r.content, r.status_code, media_type=r.headers.get("content-type"),
                        headers={"X-Squall-Leader": leader})
