"""Which URLs Squall fetches on a caller's behalf: a worker's own endpoints and nothing else.

The API reads what workers registered in ZooKeeper: each process's ``/metrics`` (the
statistics), its ``/errors``, a spout's offsets table and an acker's trees (``squall
trace``), a worker's task logs. A registration is data anyone who can write ZooKeeper can
forge, so a URL in it is fetched only if it is http or https, names no user or password,
and points at the host the worker registered as (its ``host``): a forged one reaches no
file, no other scheme and no third machine through the API. Redirects are not followed
and answers are capped (squall/endpoint_fetch.py).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from squall.core.errors import EndpointRefused

SCHEMES = ("http", "https")
#: How much of an offending URL an error quotes.
QUOTE_CHARS = 200


def shown(url: str) -> str:
    """``url`` as an error quotes it: repr'd, and cut."""
    return repr(url if len(url) <= QUOTE_CHARS else url[:QUOTE_CHARS] + "...")


def endpoint_url(url: str, host: str) -> str:
    """``url`` if it is one a worker registered as ``host`` may serve; EndpointRefused,
    naming the URL and what is wrong with it, otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on one out of range or not a number
    except ValueError as e:
        raise EndpointRefused(f"endpoint {shown(url)} is not a URL: {e}") from None
    if parts.scheme not in SCHEMES:
        raise EndpointRefused(f"endpoint {shown(url)}: only {' or '.join(SCHEMES)} is fetched, "
                              f"not {parts.scheme or 'a URL without a scheme'}")
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused(f"endpoint {shown(url)} names a user: not fetched")
    want = host.strip().lower().strip("[]")
    if not want or (parts.hostname or "") != want:
        raise EndpointRefused(f"endpoint {shown(url)} is not on {host!r}, the host its worker "
                              "registered as: not fetched")
    if port == 0:
        raise EndpointRefused(f"endpoint {shown(url)}: port 0")
    return url


def web_url(url: str) -> bool:
    """Whether ``url`` is one a page may link: http or https, with a host, no user."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and \
        parts.username is None and parts.password is None
