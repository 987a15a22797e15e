"""Which worker URLs Squall fetches on a caller's behalf (squall/core/control/endpoints.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.endpoints import QUOTE_CHARS, endpoint_url
from squall.core.errors import EndpointRefused


@pytest.mark.parametrize("url", [
    "http://10.0.0.5:9101/metrics", "https://10.0.0.5/metrics", "HTTP://10.0.0.5:1/x",
    "http://10.0.0.5:9101/logs/a%2Fb/-8192"])
def test_a_worker_s_own_http_endpoints_are_fetched(url: str) -> None:
    assert endpoint_url(url, "10.0.0.5") == url


@pytest.mark.parametrize(("url", "said"), [
    ("file:///etc/passwd", "not file"),
    ("javascript:alert(1)", "not javascript"),
    ("gopher://10.0.0.5:70/", "not gopher"),
    ("//10.0.0.5:9101/metrics", "without a scheme"),
    ("http://10.0.0.6:9101/metrics", "not on '10.0.0.5'"),
    ("http://169.254.169.254/latest/meta-data", "not on '10.0.0.5'"),
    ("http://10.0.0.5.evil.example/metrics", "not on '10.0.0.5'"),
    ("http://admin:pw@10.0.0.5:9101/metrics", "names a user"),
    ("http://10.0.0.5@10.0.0.6/metrics", "names a user"),
    ("http://10.0.0.5:99999/metrics", "not a URL"),
    ("http://10.0.0.5:0/metrics", "port 0"),
    ("http://[::1/metrics", "not a URL"),
])
def test_anything_else_is_refused_naming_the_url_and_why(url: str, said: str) -> None:
    with pytest.raises(EndpointRefused, match=said) as e:
        endpoint_url(url, "10.0.0.5")
    assert repr(url)[:40] in str(e.value)


def test_a_worker_that_registered_no_host_gets_nothing_fetched() -> None:
    with pytest.raises(EndpointRefused, match="not on ''"):
        endpoint_url("http://10.0.0.5/metrics", "")


def test_a_long_url_is_quoted_cut() -> None:
    url = "gopher://" + "x" * 10_000
    with pytest.raises(EndpointRefused) as e:
        endpoint_url(url, "x")
    assert len(str(e.value)) < QUOTE_CHARS + 200


@given(st.text(max_size=80), st.sampled_from(["10.0.0.5", "worker-1.example", "::1"]))
def test_whatever_is_fetched_is_http_on_the_registered_host(url: str, host: str) -> None:
    from urllib.parse import urlsplit

    try:
        got = endpoint_url(url, host)
    except EndpointRefused:
        return
    parts = urlsplit(got)
    assert parts.scheme in ("http", "https")
    assert parts.hostname == host and parts.username is None and parts.password is None
