"""A task process's telemetry port, as a worker starts it: listening on the address given
(loopback by default, never every interface), ``/metrics`` open to the scraper, and every
other answer (its errors, an acker's trees) only for the telemetry token, compared in
constant time; the API, which has the token, still reads them."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from services.telemetry import TOKEN_ENV
from squall.core.topology.topics import acker_topic
from squall.kafka import ensure_topics
from tests.integration.cluster import TELEMETRY_TOKEN
from tests.integration.helpers import ServiceProcess, clients

pytestmark = pytest.mark.integration


def _listening_on(port: int) -> set[str]:
    """The addresses a socket listening on ``port`` is bound to (from /proc/net/tcp)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            out.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return out


def test_a_task_port_listens_on_loopback_and_answers_queries_only_with_the_token(
        bootstrap: str, tmp_path: Path) -> None:
    name = f"tel{uuid.uuid4().hex[:6]}"
    ensure_topics(clients(bootstrap), {acker_topic(name): 1})
    acker = ServiceProcess("services.acker", [
        "--topology", name, "--tasks", "0", "--num-ackers", "1",
        "--bootstrap-servers", bootstrap], tmp_path / "acker.log",
        env={TOKEN_ENV: TELEMETRY_TOKEN})
    with acker.start():
        port = acker.metrics_port
        assert _listening_on(port) == {"127.0.0.1"}
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.get("/metrics").status_code == 200
            for path in ("/errors", "/trees/00000000000000ff"):
                refused = http.get(path)
                assert refused.status_code == 401 and TOKEN_ENV in refused.text
                wrong = http.get(path, headers={"Authorization": f"Bearer {'x' * 43}"})
                assert wrong.status_code == 401
            good = {"Authorization": f"Bearer {TELEMETRY_TOKEN}"}
            assert http.get("/errors", headers=good).status_code == 200
            tree = http.get("/trees/00000000000000ff", headers=good)
            assert tree.status_code == 404, tree.text  # answered: no such tree open


def test_a_short_telemetry_token_is_refused_at_start_naming_the_variable(
        bootstrap: str) -> None:
    got = subprocess.run([sys.executable, "-m", "services.acker", "--topology", "short",
                          "--tasks", "0", "--num-ackers", "1", "--bootstrap-servers",
                          bootstrap], env={**os.environ, TOKEN_ENV: "too-short"},
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 2
    assert f"{TOKEN_ENV} must be 32 characters at least" in got.stderr
    assert "too-short" not in got.stderr + got.stdout
