"""The API's one client for workers' endpoints (squall/endpoint_fetch.py) against a real
HTTP server: what it reads, and what it will not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from squall.core.errors import EndpointRefused, ProcessUnavailable
from squall.endpoint_fetch import Endpoints

pytestmark = pytest.mark.integration


class _Worker(BaseHTTPRequestHandler):
    """/metrics: a small answer; /huge: 3 MiB; /moved: a redirect; /slow: no answer yet."""

    hits: list[str] = []
    release = threading.Event()

    def do_GET(self) -> None:
        self.hits.append(self.path)
        if self.path == "/moved":
            self.send_response(301)
            self.send_header("Location", "/metrics")
            self.end_headers()
            return
        if self.path == "/slow":
            self.release.wait(10)
        body = b"x" * (3 << 20) if self.path == "/huge" else b"squall_up 1\n"
        self.send_response(200 if self.path != "/gone" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture()
def worker() -> Iterator[str]:
    _Worker.hits = []
    _Worker.release.clear()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Worker)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}"
    _Worker.release.set()
    srv.shutdown()
    srv.server_close()


def test_it_reads_the_registered_host_s_answers(worker: str) -> None:
    fetch = Endpoints(timeout_s=5)
    assert fetch.ok(f"{worker}/metrics", "127.0.0.1") == b"squall_up 1\n"
    assert fetch.get(f"{worker}/gone", "127.0.0.1")[0] == 404
    with pytest.raises(ProcessUnavailable, match="answered 404"):
        fetch.ok(f"{worker}/gone", "127.0.0.1")


def test_a_redirect_is_not_followed_and_a_huge_answer_is_cut_off(worker: str) -> None:
    fetch = Endpoints(timeout_s=5, max_bytes=1 << 20)
    with pytest.raises(EndpointRefused, match=r"redirect \(301\): not followed"):
        fetch.get(f"{worker}/moved", "127.0.0.1")
    with pytest.raises(EndpointRefused, match="more than 1,048,576 bytes: cut off"):
        fetch.get(f"{worker}/huge", "127.0.0.1")
    assert _Worker.hits == ["/moved", "/huge"]  # the redirect's target was never asked


def test_another_host_is_not_even_asked_and_a_silent_one_times_out(worker: str) -> None:
    fetch = Endpoints(timeout_s=5)
    with pytest.raises(EndpointRefused, match=r"not on '10\.1\.2\.3'"):
        fetch.get(f"{worker}/metrics", "10.1.2.3")
    assert _Worker.hits == []
    with pytest.raises(ProcessUnavailable, match="did not answer: ReadTimeout"):
        fetch.get(f"{worker}/slow", "127.0.0.1", timeout_s=0.5)
