"""Around every request: count it by route template, and forward a follower's writes; and
before a write is read at all, its caller is authenticated and its size checked.

Middleware runs outside FastAPI's exception handlers: errors here become responses through
the same mapping (:func:`services.api.errors.to_response`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response

from services.api.context import ApiContext, authorize, bearer_of
from services.api.errors import to_response
from squall.core.errors import AuthError, BodyError, NotLeader
from squall.core.spec_checks import MAX_SPEC_BYTES

_MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
_FORWARDED = "x-squall-forwarded-by"
#: The largest body a write may send: a spec at its limit, as JSON, with room to spare.
MAX_BODY_BYTES = 2 * MAX_SPEC_BYTES


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

    @app.middleware("http")
    async def guard_writes(request: Request, call_next: Any) -> Response:
        """Installed last, so it runs first: the caller, then the body's size, before a
        byte of the body is read or a write forwarded."""
        if request.method in _MUTATING:
            try:
                authorize(ctx.settings, bearer_of(request.headers.get("authorization")))
                _check_length(request.headers)
            except (AuthError, BodyError) as e:
                return to_response(e)
        return await call_next(request)  # type: ignore[no-any-return]


def _check_length(headers: Any) -> None:
    length = headers.get("content-length")
    if length is None:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise BodyError(411, "send the body with a Content-Length (chunked bodies are "
                                 "not read)")
        return
    try:
        n = int(length)
    except ValueError:
        raise BodyError(400, f"Content-Length {length[:20]!r} is not a number") from None
    if n > MAX_BODY_BYTES:
        raise BodyError(413, f"the body is {n:,} bytes; at most {MAX_BODY_BYTES:,} are read")
