"""The one HTTP client for what Squall fetches from its workers on a caller's behalf
(statistics, error reports, ``squall trace``, task logs): only the URLs
squall/core/control/endpoints.py allows, no redirect followed, no proxy from the
environment, a timeout, and an answer cut off past a byte cap."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from squall.core.control.endpoints import endpoint_url, shown
from squall.core.errors import EndpointRefused, ProcessUnavailable

#: The largest answer read (a busy process's /metrics is a few hundred KiB).
MAX_BYTES = 8 << 20


@dataclass
class Endpoints:
    """Fetches from workers' endpoints; thread-safe (httpx's client is)."""

    timeout_s: float = 5.0
    max_bytes: int = MAX_BYTES
    #: sent with every request (the telemetry token): never shown
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    _client: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._client = httpx.Client(timeout=self.timeout_s, follow_redirects=False,
                                    trust_env=False, headers=self.headers)

    def get(self, url: str, host: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        """``url``'s status and body, if a worker registered as ``host`` may serve it
        (EndpointRefused otherwise, or for a redirect or an answer over the cap);
        ProcessUnavailable if it does not answer within ``timeout_s`` (default: the
        client's)."""
        endpoint_url(url, host)
        try:
            with self._client.stream("GET", url, timeout=timeout_s or self.timeout_s) as r:
                if r.is_redirect:
                    raise EndpointRefused(f"endpoint {shown(url)} answered with a redirect "
                                          f"({r.status_code}): not followed")
                body = bytearray()
                for chunk in r.iter_bytes():
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise EndpointRefused(f"endpoint {shown(url)} answered with more "
                                              f"than {self.max_bytes:,} bytes: cut off")
                return r.status_code, bytes(body)
        except httpx.HTTPError as e:
            raise ProcessUnavailable(f"endpoint {shown(url)} did not answer: "
                                     f"{type(e).__name__}") from None

    def ok(self, url: str, host: str, timeout_s: float | None = None) -> bytes:
        """The body of a 200 answer; ProcessUnavailable naming the status otherwise."""
        status, body = self.get(url, host, timeout_s)
        if status != 200:
            raise ProcessUnavailable(f"endpoint {shown(url)} answered {status}")
        return body

    def close(self) -> None:
        self._client.close()
