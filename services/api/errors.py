"""The one place where the project's exceptions become HTTP statuses.

A bad spec 422, an unknown id 404, an illegal transition or a lost race 409, ZooKeeper
unavailable 503, a replica that is not the leader 503 with the leader's address, a missing
token 401, a wrong one 403, a body too large 413 (or of unknown length 411); any other
:class:`SquallError` 400.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from squall.core.errors import (
    AuthError,
    BodyError,
    ConflictError,
    CoordinationError,
    NotFoundError,
    NotLeader,
    SquallError,
    TopologyError,
)

_STATUS: dict[type[SquallError], int] = {
    TopologyError: 422, NotFoundError: 404, ConflictError: 409, CoordinationError: 503}


def error_response(status: int, kind: str, detail: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": kind, "detail": detail}, status, headers=headers)


def to_response(exc: SquallError) -> JSONResponse:
    if isinstance(exc, AuthError):
        return error_response(exc.status, "unauthorized", exc.detail,
                              {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None)
    if isinstance(exc, BodyError):
        return error_response(exc.status, "bad_body", exc.detail)
    if isinstance(exc, NotLeader):
        return error_response(503, "not_leader", str(exc),
                              {"X-Squall-Leader": exc.leader} if exc.leader else None)
    code = next((c for t, c in _STATUS.items() if isinstance(exc, t)), 400)
    return error_response(code, type(exc).__name__, str(exc))


def install(app: FastAPI) -> None:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SquallError)
        return to_response(exc)

    app.add_exception_handler(SquallError, handle)
