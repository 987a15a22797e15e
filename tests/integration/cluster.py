"""The control plane as real processes: API replicas (uvicorn) and workers."""

from __future__ import annotations

import os
import secrets
import signal
import ssl
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from squall.processes import die_with_parent, free_port
from tests.integration.helpers import wait_for

TOKEN = "test-token-0123456789-abcdefghijklmn"
#: Every Squall process of the suite authenticates to ZooKeeper as this identity (set in the
#: environment by tests/integration/conftest.py, so each one started inherits it): the
#: whole suite runs on a protected tree (docs/security.md, "ZooKeeper").
ZK_AUTH = f"squall:{secrets.token_urlsafe(24)}"
#: And every telemetry port asks for this token on all but /metrics (services/telemetry.py).
TELEMETRY_TOKEN = secrets.token_urlsafe(32)
#: And the Spark clusters the suite starts share this secret with every bolts job.
SPARK_SECRET = secrets.token_urlsafe(32)


def zk_client(hosts: str, identity: str | None = ZK_AUTH, timeout_s: float = 30) -> Any:
    """A started kazoo client, as Squall's identity unless told otherwise (None: none)."""
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=hosts, auth_data=[("digest", identity)] if identity else None)
    zk.start(timeout_s)
    return zk


class ApiProcess:
    def __init__(self, zookeeper: str, bootstrap: str, log: Path, *extra: str,
                 env: dict[str, str] | None = None, ca: Path | None = None) -> None:
        """``ca``: the replica serves HTTPS (``extra`` names its certificate), checked
        against this CA file."""
        self.port = free_port()
        self.url = f"{'https' if ca else 'http'}://127.0.0.1:{self.port}"
        self.verify: Any = ssl.create_default_context(cafile=str(ca)) if ca else True
        self.log = log
        self.args = ["--zookeeper", zookeeper, "--bootstrap-servers", bootstrap,
                     "--port", str(self.port), "--session-timeout-s", "4", *extra]
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = {**os.environ, "SQUALL_API_TOKEN": TOKEN, **(env or {})}

    def start(self) -> ApiProcess:
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen([sys.executable, "-m", "services.api", *self.args],
                                     stdout=out, stderr=subprocess.STDOUT,
                                     env=self.env,
                                     preexec_fn=die_with_parent)
        wait_for(lambda: self._up() or self.proc is None or self.proc.poll() is not None, 60,
                 f"the API on {self.url}")
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        wait_for(self._leader_known, 30, "a leader among the API replicas")
        return self

    def _leader_known(self) -> bool:
        """A leader is elected and answers (a killed replica's election node lingers until
        its session expires)."""
        try:
            auth = {"Authorization": f"Bearer {TOKEN}"}  # for a replica whose reads need it
            leader = httpx.get(f"{self.url}/api/v1/cluster/summary", headers=auth,
                               timeout=2, verify=self.verify).json()["leader"]
            return leader is not None and bool(httpx.get(
                f"{leader}/api/v1/cluster/summary", headers=auth, timeout=2,
                verify=self.verify).json()["thisReplicaLeads"])
        except (httpx.HTTPError, ValueError, KeyError):
            return False

    def _up(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1,
                             verify=self.verify).status_code == 200
        except httpx.HTTPError:
            return False

    def client(self, token: str | None = TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30,
                            verify=self.verify)

    def leads(self) -> bool:
        try:
            body: dict[str, Any] = httpx.get(f"{self.url}/api/v1/cluster/summary",
                                             timeout=2, verify=self.verify).json()
        except httpx.HTTPError:
            return False
        return bool(body["thisReplicaLeads"])

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def namespace(zookeeper: str) -> str:
    """A ZooKeeper chroot of its own (``host:port/squall-test-<id>``): a separate Squall
    cluster on the shared ZooKeeper, so one test's topologies never reach another's
    workers."""
    from kazoo.client import KazooClient

    root = f"/squall-test-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper)
    zk.start(10)
    try:
        zk.ensure_path(root)
    finally:
        zk.stop()
        zk.close()
    return zookeeper + root
