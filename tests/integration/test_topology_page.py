"""The topology page in headless Chromium (Debian's package): the DAG is drawn from the
live API numbers, and a screenshot is taken and checked."""

from __future__ import annotations

import itertools
import re
import shutil
import struct
import subprocess
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squall.kafka import ensure_topics
from tests.integration.cluster import TOKEN, ApiProcess, namespace
from tests.integration.helpers import ServiceProcess, clients, produce_source, wait_for

pytestmark = pytest.mark.integration
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is needed for this test (scripts/test.sh installs it)"
    return exe


def browse(url: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{uuid.uuid4().hex[:6]}"
    return subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                           "--window-size=1400,900", "--virtual-time-budget=6000", *args, url],
                          capture_output=True, text=True, timeout=120)


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the inflated scanlines of a PNG (enough to see it is not blank)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.fixture
def running(zookeeper: str, bootstrap: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A topology whose spout and acker run (no Spark here: its bolt stays unassigned)."""
    zookeeper = namespace(zookeeper)
    api = ApiProcess(zookeeper, bootstrap, tmp_path / "api.log", "--lag-interval-s", "1",
                     "--grafana-url", "http://grafana.example:3000").start()
    name = f"pg{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: 1}, 30)
    workers = [ServiceProcess("services.worker", [
        "--kind", kind, "--worker-id", f"{kind}-{name}", "--zookeeper", zookeeper,
        "--bootstrap-servers", bootstrap, "--workdir", str(tmp_path / kind),
        "--session-timeout-s", "3"], tmp_path / f"{kind}.log").start()
        for kind in ("acker", "spout")]
    spec = {"name": name, "ackers": 1, "message_timeout_s": 300,
            "spouts": [{"name": "sentences", "topics": [source]}],
            "bolts": [{"name": "split", "class": "examples.wordcount:SplitSentence",
                       "outputs": {"default": ["word"]},
                       "inputs": [{"component": "sentences"}]},
                      {"name": "count", "class": "examples.wordcount:WordCount",
                       "outputs": {"default": ["word", "count"]},
                       "inputs": [{"component": "split", "grouping": "fields",
                                   "fields": ["word"]}]}]}
    try:
        with api.client() as http:
            assert http.post("/topologies", json=spec).status_code == 201
        produce_source(bootstrap, source, [b"the cow jumped over the moon"] * 250, 1)
        wait_for(lambda: httpx.get(f"{api.url}/api/v1/topology/{name}", timeout=10).json()
                 ["spouts"][0]["emitted"] >= 250, 60, "the spout to emit")
        yield {"api": api, "name": name, "zookeeper": zookeeper, "bootstrap": bootstrap}
    finally:
        for w in workers:
            w.stop()
        api.stop()


def test_topology_page_draws_the_dag_with_live_numbers(running: dict[str, Any],
                                                        tmp_path: Path) -> None:
    url = f"{running['api'].url}/ui/topologies/{running['name']}"
    r = browse(url, tmp_path, "--dump-dom")
    dom = r.stdout
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'data-rendered="' in dom, "the page's script did not draw the DAG"
    for comp in ("sentences", "split", "count", "__acker"):
        assert f'data-component="{comp}"' in dom, comp
    assert "emitted 250" in dom  # the spout's number, from the live API
    assert "fields(word)" in dom and "shuffle" in dom  # edges carry their groupings
    assert 'class="status ACTIVE"' in dom
    # Charts over the window, the errors panel, and where to look further.
    assert 'data-charted="' in dom
    for title in ("Tuple trees per second", "Complete latency",
                  "Replays and dead letters per second", "Lag (messages not yet committed)",
                  "Oldest waiting message"):
        assert f'data-chart="{title}"' in dom, title
    assert "no errors reported" in dom
    assert 'href="http://grafana.example:3000/d/squall-topology?var-topology=' in dom
    assert "no Spark UI" in dom  # no bolts job runs here


def test_the_charts_show_the_numbers_over_time(running: dict[str, Any], tmp_path: Path
                                               ) -> None:
    api, name = running["api"], running["name"]

    def history() -> dict[str, Any]:
        got: dict[str, Any] = httpx.get(f"{api.url}/topologies/{name}/history",
                                        params={"window": "600"}, timeout=10).json()
        return got

    # The spout's emits between two of the API's snapshots (10 s apart) make a rate; no
    # bolt runs here, so no tree completes: no acks and no latency. The lag is read from
    # Kafka every second.
    wait_for(lambda: any(p["emitted_per_s"] > 0 for p in history()["points"])
             and len(history()["points"]) >= 2, 60, "an emitted rate in the history",
             every_s=1)
    points = history()["points"]
    assert all(p["t_ms"] < q["t_ms"] for p, q in itertools.pairwise(points))
    assert all(p["acked_per_s"] == 0 and p["latency_p99_ms"] is None for p in points)
    assert history()["lag"] and all(x["messages"] >= 0 for x in history()["lag"])
    assert httpx.get(f"{api.url}/topologies/{name}/history", params={"window": "7"},
                     timeout=10).status_code == 422
    r = browse(f"{api.url}/ui/topologies/{name}", tmp_path, "--dump-dom")
    lines = re.findall(r'<path class="line" d="([^"]*)"', r.stdout)
    assert any(d.count("L") >= 1 for d in lines), lines  # a drawn line, not a dot


def test_a_link_opens_a_component_over_a_window(running: dict[str, Any], tmp_path: Path
                                               ) -> None:
    url = f"{running['api'].url}/ui/topologies/{running['name']}#window=10800&component=sentences"
    dom = browse(url, tmp_path, "--dump-dom").stdout
    assert re.search(r'<div id="drill" data-component="sentences"', dom), dom[-3000:]
    assert "sentences · spout" in dom and "where is my message?" in dom
    assert "over <b>3h 0m 0s</b>" in dom  # the window the link chose
    assert 'data-window="10800" class="on"' in dom


def test_the_page_works_with_reads_behind_a_token(running: dict[str, Any], tmp_path: Path
                                                  ) -> None:
    closed = ApiProcess(running["zookeeper"], running["bootstrap"], tmp_path / "closed.log",
                        "--reads-need-token").start()
    try:
        url = f"{closed.url}/ui/topologies/{running['name']}"
        dom = browse(url, tmp_path, "--dump-dom").stdout
        assert '<form id="token-form">' in dom  # shown: the page asks for the token
        assert "data-rendered" not in dom and 'data-component="sentences"' not in dom
        dom = browse(f"{url}#token={TOKEN}", tmp_path, "--dump-dom").stdout
        assert 'data-rendered="' in dom and 'data-charted="' in dom
        assert 'data-component="sentences"' in dom and 'class="status ACTIVE"' in dom
        assert '<form id="token-form" hidden="">' in dom
        index = browse(f"{closed.url}/ui#token={TOKEN}", tmp_path, "--dump-dom").stdout
        assert running["name"] in index  # the index lists it once the token is known
    finally:
        closed.stop()


def test_topology_page_screenshot(running: dict[str, Any], tmp_path: Path) -> None:
    shot = tmp_path / "topology.png"
    url = f"{running['api'].url}/ui/topologies/{running['name']}"
    r = browse(url, tmp_path, f"--screenshot={shot}")
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    width, height, pixels = png_pixels(shot)
    assert (width, height) == (1400, 900)
    # Not a blank page: a drawn DAG has many distinct byte values across its scanlines.
    assert len(set(pixels)) > 64, "the screenshot looks blank"


def test_topology_page_of_an_unknown_id_is_404(zookeeper: str, bootstrap: str,
                                               tmp_path: Path) -> None:
    api = ApiProcess(namespace(zookeeper), bootstrap, tmp_path / "api.log").start()
    try:
        assert httpx.get(f"{api.url}/ui/topologies/ghost", timeout=10).status_code == 404
        index = httpx.get(f"{api.url}/ui", timeout=10)
        assert index.status_code == 200 and "no topologies" in index.text
    finally:
        api.stop()


#: What an injected script would do: only running code sets it.
PWNED = "document.body.setAttribute('data-pwned','1')"


def test_markup_and_script_urls_from_workers_never_run_in_the_page(
        zookeeper: str, bootstrap: str, tmp_path: Path) -> None:
    """A worker (here a forged registration, as an insider with ZooKeeper's identity could
    make) serves markup in an error, and a ``javascript:`` Spark UI link;
    in a real browser nothing of it runs and no such link is written. Names that would
    carry markup are refused at submit. The pages carry a Content-Security-Policy that
    allows their own script alone."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.integration.cluster import zk_client

    ns = namespace(zookeeper)
    api = ApiProcess(ns, bootstrap, tmp_path / "api.log").start()
    name = f"xss{uuid.uuid4().hex[:6]}"
    spec = {"name": name, "ackers": 1, "spouts": [{"name": "sentences", "topics": ["t"]}],
            "bolts": [{"name": "split", "class": "examples.wordcount:SplitSentence",
                       "outputs": {"default": ["word"]}, "inputs": [{"component": "sentences"}]}]}
    hostile = f'<img src=x onerror="{PWNED}"><script>{PWNED}</script>'
    tid = [name]  # its id, once submitted

    class Worker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/errors":
                body = json.dumps({"errors": [{"component": "split", "task": 0,
                                               "error": f"boom {hostile}",
                                               "time_ms": 1}]}).encode()
            else:
                body = (f'squall_bolt_spark_ui_info{{topology="{tid[0]}",'
                        f'url="javascript:{PWNED}"}} 1\n').encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Worker)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    zk = zk_client(ns)
    try:
        with api.client() as http:
            bad = {**spec, "name": f"x<script>{PWNED}</script>"}
            assert http.post("/topologies", json=bad).status_code == 422
            r = http.post("/topologies", json=spec)
            assert r.status_code == 201, r.text
            tid[0] = r.json()["id"]
            ends = [{"topology": tid[0], "kind": "bolts", "component": "split", "tasks": [0],
                     "url": f"http://127.0.0.1:{srv.server_port}/metrics", "process": "p"}]
            info = {"id": "forged-page", "kind": "bolts", "capacity": 1, "host": "127.0.0.1",
                    "pid": 1, "started_ms": 0, "endpoints": ends, "stopping": [],
                    "session": ""}
            zk.create("/squall/workers/forged-page", json.dumps(info).encode(),
                      ephemeral=True)
            wait_for(lambda: "boom" in http.get(f"/api/v1/topology/{tid[0]}").text, 60,
                     "the forged worker's error in the topology's view")
        page = httpx.get(f"{api.url}/ui/topologies/{name}", timeout=10)
        csp = page.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'sha256-" in csp \
            and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["x-frame-options"] == "DENY"
        dom = browse(f"{api.url}/ui/topologies/{name}", tmp_path, "--dump-dom").stdout
        assert 'data-rendered="' in dom, dom[-2000:]  # the page ran, under its policy
        assert "boom" in dom and "&lt;img src=x" in dom  # the error shown, as text
        assert 'data-pwned="1"' not in dom  # the attribute only a script that ran sets
        drawn = dom.split('<script id="topology-id"')[0]
        i = drawn.find("javascript:")
        assert i < 0, drawn[max(0, i - 300):i + 100]
        assert 'id="spark-ui"' not in drawn
    finally:
        zk.delete("/squall/workers/forged-page")
        zk.stop()
        zk.close()
        srv.shutdown()
        api.stop()
