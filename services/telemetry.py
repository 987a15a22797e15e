"""A service's telemetry port: ``/metrics`` for Prometheus, and for the API ``/errors``
(Storm UI's ``lastError``) and the service's own query routes (a spout's offsets, an
acker's trees: services/loop_queries.py).

The port listens on the address its worker publishes (``--metrics-host``; loopback by
default), never on every interface. With a telemetry token (``SQUALL_TELEMETRY_TOKEN``,
read from the environment only, the same for the API and every worker, whose task
processes inherit it) every path but ``/metrics`` needs ``Authorization: Bearer <token>``:
those answers show what the topology is doing to which messages; ``/metrics`` stays open to
the scraper, as Prometheus expects (docs/security.md, "Listeners")."""

from __future__ import annotations

import hmac
import json
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from services.loop_queries import Handler
from squall.core.control.error_reports import ErrorReports

#: The variable every process reads the telemetry token from.
TOKEN_ENV = "SQUALL_TELEMETRY_TOKEN"
#: The shortest token taken, as the API's (services/api/roles.py).
MIN_TOKEN = 32
#: The one path open without the token.
OPEN = "/metrics"


class TelemetryAccess(BaseSettings):
    """The telemetry token, for a service that serves telemetry or fetches it (the API)."""

    # From the environment only (exclude: no flag, which would show in the process list).
    telemetry_token: SecretStr | None = Field(
        None, exclude=True, validation_alias=AliasChoices(TOKEN_ENV), description=(
            "the bearer token the telemetry ports ask for on every path but /metrics"))

    @field_validator("telemetry_token")
    @classmethod
    def _long_enough(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and len(v.get_secret_value()) < MIN_TOKEN:
            raise ValueError(f"{TOKEN_ENV} must be {MIN_TOKEN} characters at least")
        return v


def authorized(token: SecretStr | None, header: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (any, without one)."""
    if token is None:
        return True
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.get_secret_value().encode())


def bearer(token: SecretStr | None) -> dict[str, str]:
    """The header a fetch of a telemetry port sends."""
    return {} if token is None else {"Authorization": f"Bearer {token.get_secret_value()}"}


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds are not news."""


def serve_telemetry(host: str, port: int, registry: CollectorRegistry,
                    errors: ErrorReports, routes: Mapping[str, Handler] | None = None,
                    token: SecretStr | None = None) -> None:
    """``/metrics``, ``/errors`` and the service's own ``routes`` on one port, from a
    daemon thread; with ``token``, all but ``/metrics`` behind it."""
    metrics = make_wsgi_app(registry)

    def answer(start_response: Callable[..., Any], status: int, body: bytes) -> list[bytes]:
        start_response(f"{status} {HTTPStatus(status).phrase}", [
            ("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = str(environ.get("PATH_INFO", ""))
        if path == OPEN:
            return metrics(environ, start_response)
        if not authorized(token, str(environ.get("HTTP_AUTHORIZATION", ""))):
            return answer(start_response, 401, json.dumps(
                {"error": f"{path} needs the telemetry token ({TOKEN_ENV})"}).encode())
        status, body = 0, b""
        if path == "/errors":
            status, body = 200, errors.to_json()
        for prefix, handler in (routes or {}).items():
            if path.startswith(prefix):
                status, body = handler(path.removeprefix(prefix))
        if status:
            return answer(start_response, status, body)
        return metrics(environ, start_response)

    server = make_server(host, port, app, _Server, _QuietHandler)
    threading.Thread(target=server.serve_forever, daemon=True, name="telemetry").start()
