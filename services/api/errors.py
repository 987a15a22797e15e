"""The one place where the project's exceptions become HTTP statuses.

A bad spec 422, an unknown id 404, an illegal transition or a lost race 409, ZooKeeper
unavailable 503, a replica that is not the leader 503 with the leader's address, a missing
token 401, a wrong one or one of a role below the route's 403, a body too large 413 (or of
unknown length 411); any other :class:`SquallError` 400.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from squall.core.errors import (
    ConflictError,
    CoordinationError,
    KafkaUnavailable,
    NotFoundError,
    NotLeader,
    ProcessUnavailable,
    SquallError,
    TopologyError,
)


class AuthError(SquallError):
    """A request without a valid bearer token."""


class NoToken(AuthError):
    """The route needs a bearer token and none was given."""


class WrongToken(AuthError):
    """The bearer token given is not the API's."""


class RoleTooLow(AuthError):
    """The bearer token is a role's whose rights do not reach this route."""


class BodyError(SquallError):
    """A request body the API will not read."""


class BodyTooLarge(BodyError):
    """More bytes than the API reads."""


class BodyLengthUnknown(BodyError):
    """No Content-Length (a chunked body)."""


class BadContentLength(BodyError):
    """A Content-Length that is not a number."""


_STATUS: dict[type[SquallError], int] = {
    NoToken: 401, WrongToken: 403, RoleTooLow: 403, BodyTooLarge: 413, BodyLengthUnknown: 411,
    BadContentLength: 400, TopologyError: 422, NotFoundError: 404, ConflictError: 409,
    CoordinationError: 503, KafkaUnavailable: 503, ProcessUnavailable: 503}


class ErrorBody(BaseModel):
    """Every error's body: what kind, and what was wrong where."""

    error: str
    detail: str


_WHY = {400: "a malformed request (e.g. an If-Match that is not a version)",
        401: "no bearer token", 403: "a wrong bearer token, or a role's below the route's",
        404: "no such topology",
        409: "an illegal transition, a name taken, a state that cannot be kept, or a lost "
             "race (If-Match)",
        411: "a body of unknown length", 413: "a body too large",
        422: "an invalid spec, body, path or query: the detail names it",
        503: "ZooKeeper or Kafka unavailable, this replica cannot reach the leader, or a "
             "worker did not answer"}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with :class:`ErrorBody`."""
    return {s: {"model": ErrorBody, "description": _WHY[s]} for s in statuses}


#: What a read may answer besides 200, and what a write may.
READ_ERRORS = documented(404, 422, 503)
#: A page's errors: JSON, whatever the page's own type (its route documents text/html).
PAGE_ERRORS: dict[int | str, dict[str, Any]] = {
    s: {"description": _WHY[s], "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ErrorBody"}}}} for s in (404, 422, 503)}
WRITE_ERRORS = documented(400, 401, 403, 404, 409, 411, 413, 422, 503)


def error_response(status: int, kind: str, detail: str,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": kind, "detail": detail}, status, headers=headers)


def to_response(exc: SquallError) -> JSONResponse:
    code = next((c for t, c in _STATUS.items() if isinstance(exc, t)), 400)
    if isinstance(exc, AuthError):
        return error_response(code, "unauthorized", str(exc),
                              {"WWW-Authenticate": "Bearer"} if code == 401 else None)
    if isinstance(exc, BodyError):
        return error_response(code, "bad_body", str(exc))
    if isinstance(exc, NotLeader):
        return error_response(503, "not_leader", str(exc),
                              {"X-Squall-Leader": exc.leader} if exc.leader else None)
    return error_response(code, type(exc).__name__, str(exc))


def install(app: FastAPI) -> None:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SquallError)
        return to_response(exc)

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        """FastAPI's own 422 (a path, query or body that does not fit), in the same shape."""
        assert isinstance(exc, RequestValidationError)
        detail = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ()))}: {e.get('msg')}"
                           for e in exc.errors()[:5])
        return error_response(422, "invalid_request", detail or "invalid request")

    async def http(_request: Request, exc: Exception) -> JSONResponse:
        """FastAPI's own HTTP errors (a body that is not JSON: 400), in the same shape."""
        assert isinstance(exc, StarletteHTTPException)
        kind = "bad_request" if exc.status_code == 400 else f"http_{exc.status_code}"
        return error_response(exc.status_code, kind, str(exc.detail),
                              dict(exc.headers) if exc.headers else None)

    app.add_exception_handler(SquallError, handle)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http)
