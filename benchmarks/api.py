"""The API's read routes under load: Storm UI's summaries, as dashboards and scripts poll them.

Starts the embedded stack and one API replica (``python -m services.api``), submits
``--topologies`` topologies (inactive: no workers needed, the routes' work is the same),
then ``--clients`` concurrent clients GET each route ``--requests`` times in all, keep-alive
connections, after ``--warmup`` untimed requests.

Last line: one JSON object, per route ``{route: {"requests_per_s", "p50_ms", "p99_ms"}}``,
plus ``"topologies"``, ``"clients"``, and over every route ``"min_requests_per_s"`` and
``"max_p99_ms"``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from squall.dev.stack import EmbeddedStack, StackSettings
from squall.processes import die_with_parent, free_port

#: Every read route that answers from the API's memory; ``{id}`` is the first topology's.
#: (The logs, messages and dead letters ask a worker, a spout or Kafka: not dashboard reads.)
ROUTES = ("/api/v1/topology/summary", "/api/v1/cluster/summary", "/api/v1/nimbus/summary",
          "/api/v1/supervisor/summary", "/topologies", "/workers", "/api/v1/topology/{id}",
          "/api/v1/topology/{id}/component/split", "/api/v1/topology/{id}/metrics",
          "/api/v1/topology/{id}/lag", "/topologies/{id}", "/topologies/{id}/history",
          "/topologies/{id}/errors")
TOKEN = "bench-token-0123456789-abcdefghijkl"


def spec(name: str) -> dict[str, Any]:
    return {"name": name, "ackers": 2, "spouts": [
        {"name": "sentences", "topics": [f"src-{name}"], "parallelism": 2}],
        "bolts": [{"name": "split", "class": "examples.wordcount:SplitSentence",
                   "parallelism": 2, "outputs": {"default": ["word"]},
                   "inputs": [{"component": "sentences"}]}]}


async def load(url: str, route: str, clients: int, n: int, warmup: int) -> dict[str, float]:
    """``clients`` keep-alive connections, each a minimal HTTP/1.1 client on asyncio streams
    (httpx cost more CPU than the server it measured, on the same two cores)."""
    host, port = url.removeprefix("http://").split(":")
    request = f"GET {route} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    lat: list[float] = []
    left = n + warmup

    async def one() -> None:
        nonlocal left
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while left > 0:
                left -= 1
                timed = left < n
                t = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                if status != 200:
                    raise SystemExit(f"GET {route}: HTTP {status}")
                if timed:
                    lat.append(time.perf_counter() - t)
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(clients)))
    secs = time.perf_counter() - t0
    ms = np.array(lat) * 1000
    # Rate over the timed requests only: the warmup ran first, on the same connections.
    timed_secs = secs * len(lat) / (n + warmup)
    return {"requests_per_s": round(len(lat) / timed_secs, 1),
            "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topologies", type=int, default=100)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--requests", type=int, default=4000, help="timed requests per route")
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--routes", default=",".join(ROUTES), help="comma-separated")
    a = p.parse_args()
    out: dict[str, Any] = {"topologies": a.topologies, "clients": a.clients}
    with tempfile.TemporaryDirectory(prefix="squall-api-bench-") as tmp, \
            EmbeddedStack(StackSettings(home=Path(tmp) / "stack")) as info:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = open(Path(tmp) / "api.log", "wb")  # noqa: SIM115 - the child owns it
        api = subprocess.Popen(
            [sys.executable, "-m", "services.api", "--zookeeper", info.zookeeper,
             "--bootstrap-servers", info.bootstrap_servers, "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
            env={**os.environ, "SQUALL_API_TOKEN": TOKEN})
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/api/v1/cluster/summary", timeout=2).json()[
                            "thisReplicaLeads"]:
                        break
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline or api.poll() is not None:
                    raise SystemExit("the API did not come up: "
                                     + (Path(tmp) / "api.log").read_text()[-2000:])
                time.sleep(0.2)
            print(f"submitting {a.topologies} topologies ...", file=sys.stderr, flush=True)
            with httpx.Client(base_url=url, timeout=30,
                              headers={"Authorization": f"Bearer {TOKEN}"}) as c:
                ids = [c.post("/topologies", params={"activate": "false"},
                              json=spec(f"t{i:03d}")).raise_for_status().json()["id"]
                       for i in range(a.topologies)]
            for template in a.routes.split(","):
                route = template.replace("{id}", ids[0])
                print(f"GET {route}, {a.clients} clients ...", file=sys.stderr, flush=True)
                out[template] = asyncio.run(load(url, route, a.clients, a.requests, a.warmup))
                print(f"  {out[template]}", file=sys.stderr, flush=True)
            timed = [v for k, v in out.items() if k.startswith("/")]
            out["min_requests_per_s"] = min(v["requests_per_s"] for v in timed)
            out["max_p99_ms"] = max(v["p99_ms"] for v in timed)
        finally:
            api.terminate()
            api.wait(15)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
