"""Around every request, as one plain ASGI middleware (Starlette's ``BaseHTTPMiddleware``,
one per concern, cost a third of a summary route's time): count it by route template;
before a write is read at all, authenticate its caller and check its size; and forward a
follower's writes to the leader.

It runs outside FastAPI's exception handlers: errors here become responses through the
same mapping (:func:`services.api.errors.to_response`)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.context import ApiContext, authorize, bearer_of
from services.api.errors import (
    AuthError,
    BadContentLength,
    BodyError,
    BodyLengthUnknown,
    BodyTooLarge,
    to_response,
)
from services.api.roles import Role
from squall.core.errors import NotLeader
from squall.core.topology.checks import MAX_SPEC_BYTES

_MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
#: What stays open when reads need a token: probes, the API's own documents and the pages'
#: shells and assets (they hold no data: the page asks for it with the token).
_OPEN = frozenset({"/healthz", "/readyz", "/openapi.json"})
_OPEN_UNDER = ("/docs", "/redoc", "/ui", "/static/")
_FORWARDED = "x-squall-forwarded-by"
#: On every answer: no type sniffing (a JSON body is never run as a script), no referrer
#: (a page's address holds a topology's id), no frame around anything the API serves.
_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
            (b"x-frame-options", b"DENY")]
#: Every call that may change something, with who made it (docs/security.md).
audit = logging.getLogger("squall.api.audit")
#: The largest body a write may send: a spec at its limit, as JSON, with room to spare.
MAX_BODY_BYTES = 2 * MAX_SPEC_BYTES


class ApiMiddleware:
    def __init__(self, app: ASGIApp, ctx: ApiContext) -> None:
        self.app, self.ctx = app, ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        caller: list[Role | None] = []
        try:
            early = await self._write(Request(scope, receive), caller) \
                if scope["method"] in _MUTATING else self._read(scope)
            if early is not None:
                await early(scope, receive, sending)
            else:
                await self.app(scope, receive, sending)
        finally:
            # The route's template, never the raw path: labels stay bounded.
            name = getattr(scope.get("route"), "path", "unmatched")
            m = self.ctx.metrics
            m.requests.labels(scope["method"], name, str(status)).inc()
            m.latency.labels(scope["method"], name).observe(time.perf_counter() - t0)
            if scope["method"] in _MUTATING:
                _audit(scope, caller[0] if caller else None, status)

    def _read(self, scope: Scope) -> Response | None:
        """With ``reads_need_token``, the topology and cluster reads need the token too
        (health, readiness, metrics and the API's own docs stay open). None: go on."""
        path = str(scope.get("path", ""))
        if not self.ctx.settings.reads_need_token or path in _OPEN or \
                path.startswith(_OPEN_UNDER):
            return None
        headers = dict(scope.get("headers") or [])
        try:
            authorize(self.ctx.settings, bearer_of(
                headers.get(b"authorization", b"").decode("latin-1") or None), Role.READER)
        except AuthError as e:
            return to_response(e)
        return None

    async def _write(self, request: Request, caller: list[Role | None]) -> Response | None:
        """The caller (an operator at least; the route may ask more), then the body's size,
        before a byte of the body is read; then a follower forwards the write to the leader
        (once: no loops). None: go on. ``caller`` gets the caller's role."""
        try:
            caller.append(authorize(self.ctx.settings, bearer_of(
                request.headers.get("authorization")), Role.OPERATOR))
            _check_length(request.headers)
        except (AuthError, BodyError) as e:
            return to_response(e)
        control, url = self.ctx.control, self.ctx.settings.url
        if control.state != "CONNECTED" or control.leading.is_set():
            return None
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
            async with httpx.AsyncClient(
                    timeout=30, verify=self.ctx.settings.forwarding_verify()) as client:
                r = await client.request(request.method, leader + request.url.path,
                                         params=request.query_params,
                                         content=await request.body(), headers=headers)
        except httpx.HTTPError as e:
            return to_response(NotLeader(leader, f"the leader {leader} did not answer: {e}"))
        return Response(r.content, r.status_code, media_type=r.headers.get("content-type"),
                        headers={"X-Squall-Leader": leader})


def _audit(scope: Scope, role: Role | None, status: int) -> None:
    """One line for every call that may change something: who (the role the token is, or
    none), from where, what, and the answer's status."""
    client = scope.get("client") or ("?", 0)
    headers = dict(scope.get("headers") or [])
    via = headers.get(_FORWARDED.encode(), b"").decode("latin-1")
    audit.info("%s %s by %s from %s%s: %d", scope["method"], scope.get("path", ""),
               role if role is not None else "no role", client[0],
               f" (forwarded by {via[:200]})" if via else "", status)


def install(app: FastAPI, ctx: ApiContext) -> None:
    app.add_middleware(ApiMiddleware, ctx=ctx)


def _check_length(headers: Any) -> None:
    length = headers.get("content-length")
    if length is None:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise BodyLengthUnknown("send the body with a Content-Length (chunked bodies are "
                                 "not read)")
        return
    try:
        n = int(length)
    except ValueError:
        raise BadContentLength(f"Content-Length {length[:20]!r} is not a number") from None
    if n > MAX_BODY_BYTES:
        raise BodyTooLarge(f"the body is {n:,} bytes; at most {MAX_BODY_BYTES:,} are read")
