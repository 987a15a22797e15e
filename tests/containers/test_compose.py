"""docker-compose.yml brought up for real, with podman: the exact word count submitted,
10,000 sentences fed, every service healthy, the counts exact and every Prometheus target
up; then the stack restarted, more fed, and every count still exact (nothing lost, nothing
counted twice); then the stack brought down.

The images that no registry here can give are made here (``tests/containers/images``,
``compose.local.yml``); Squall's own image is built from the repository's Dockerfile on a
Debian base made with debootstrap. The restart restarts every service, the broker too (its
data is on its volume)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from squall.client import ApiClient
from squall.core.errors import SquallError
from squall.demo import SENTENCES, SOURCE, demo_topology, state_counts
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.containers

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PROJECT = "squall-test"
BASE = "localhost/squall-base:bookworm"
SQUALL = "localhost/squall:dev"
LOCAL = ("kafka", "zookeeper", "postgres", "prometheus")
#: Host ports of the stack under test (away from the defaults a developer may be using).
PORTS = {"SQUALL_API_PORT": "18080", "SQUALL_PROMETHEUS_PORT": "19090",
         "SQUALL_ZK_PORT": "12181", "SQUALL_KAFKA_PORT": "19094",
         "SQUALL_SPARK_UI_PORT": "18081", "SQUALL_GRAFANA_PORT": "13000",
         "SQUALL_TEST_POSTGRES_PORT": "15432"}
SECRETS = {"SQUALL_API_TOKEN": "compose-test-token-0123456789-abcdef",
           "SQUALL_POSTGRES_PASSWORD": "compose-pw",
           "SQUALL_GRAFANA_PASSWORD": "compose-grafana",
           "SQUALL_SPARK_SECRET": "compose-spark-secret-0123456789-abcdef"}
#: Services with a healthcheck, all of which must report healthy.
HEALTHY = ("zookeeper", "kafka", "postgres", "spark-master", "spark-worker", "api", "spout",
           "acker", "bolts", "prometheus")


def run(*argv: str | Path, timeout_s: float = 1800, stdin: bytes | None = None,
        check: bool = True) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, **PORTS, **SECRETS}
    env.setdefault("CONTAINERS_CONF", str(HERE / "containers.conf"))
    out = subprocess.run([str(a) for a in argv], input=stdin, capture_output=True, env=env,
                         timeout=timeout_s, cwd=ROOT)
    if check and out.returncode:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {out.returncode}:\n"
                             f"{out.stdout.decode()[-2000:]}\n{out.stderr.decode()[-3000:]}")
    return out


def compose(*argv: str, timeout_s: float = 600) -> subprocess.CompletedProcess[bytes]:
    return run(sys.executable, "-m", "podman_compose", "-p", PROJECT,
               "-f", ROOT / "docker-compose.yml", "-f", HERE / "compose.local.yml", *argv,
               timeout_s=timeout_s)


def await_(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    wait_for(cond, timeout_s, what, every_s=2, explain=lambda: down() + logs())


def down() -> str:
    """Prometheus's targets that are not up, as it says."""
    try:
        return "".join(f"target {t['scrapeUrl']} {t['labels'].get('job')}: {t['health']} "
                       f"({t.get('lastError', '')})\n" for t in targets()
                       if t["health"] != "up")
    except (httpx.HTTPError, ValueError, KeyError) as e:
        return f"(no targets: {e})\n"


def logs() -> str:
    out = []
    for svc in ("api", "spout", "acker", "bolts"):
        got = run("podman", "logs", "--tail", "15", container(svc), check=False)
        out.append(f"--- {svc}\n{(got.stdout + got.stderr).decode(errors='replace')}")
    return "\n".join(out)


def container(service: str) -> str:
    return f"{PROJECT}_{service}_1"


def image_exists(name: str) -> bool:
    return run("podman", "image", "exists", name, check=False).returncode == 0


@pytest.fixture(scope="module")
def images() -> None:
    """The base (made once), Squall's image from this checkout and the local stand-ins
    (built each run: podman's layer cache makes an unchanged one a matter of seconds)."""
    for tool in ("podman", "debootstrap"):
        assert shutil.which(tool), f"the compose test needs {tool} (scripts/containers.sh)"
    if not image_exists(BASE):
        run("bash", HERE / "images" / "base.sh", BASE)
    run("podman", "build", "--build-arg", f"BASE={BASE}", "-t", SQUALL, ROOT)
    from squall.dev import broker

    ctx = HERE / "images"
    for name in LOCAL:
        tag = f"localhost/squall-test-{name}:latest"
        if name == "kafka":  # the jars every other test runs (gitignored)
            shutil.rmtree(ctx / "libs", ignore_errors=True)
            shutil.copytree(broker.fetch(), ctx / "libs")
        try:
            run("podman", "build", "--build-arg", f"BASE={BASE}", "-t", tag,
                "-f", ctx / f"{name}.Containerfile", ctx)
        finally:
            shutil.rmtree(ctx / "libs", ignore_errors=True)


def healthy(service: str) -> bool:
    return run("podman", "healthcheck", "run", container(service), check=False,
               timeout_s=60).returncode == 0


def feed(n: int, seed: int) -> Counter[str]:
    """``n`` sentences into the source topic, from inside the stack (the broker advertises
    its in-stack name); the words fed, counted."""
    rng = random.Random(seed)
    lines = [rng.choice(SENTENCES) for _ in range(n)]
    script = ("import sys\nfrom confluent_kafka import Producer\n"
              "p = Producer({'bootstrap.servers': 'kafka:9092', 'linger.ms': 20})\n"
              "for line in sys.stdin:\n"
              f"    p.produce({SOURCE!r}, line.rstrip('\\n').encode())\n"
              "    p.poll(0)\n"
              "assert p.flush(60) == 0, 'undelivered'\n")
    run("podman", "exec", "-i", container("api"), "python", "-c", script,
        stdin="\n".join(lines).encode() + b"\n", timeout_s=300)
    return Counter(w for line in lines for w in line.split())


@pytest.fixture(scope="module")
def stack(images: None) -> Iterator[ApiClient]:
    compose("down", "-v", timeout_s=300)  # what an interrupted run left
    # --no-deps: podman 4 cannot wait for a dependency's health (podman-compose ignores the
    # conditions) and fails to start a service that depends on an exited one-shot (the
    # topics); every Squall service restarts until what it needs answers.
    compose("up", "-d", "--no-deps")
    client = ApiClient(f"http://127.0.0.1:{PORTS['SQUALL_API_PORT']}",
                       SECRETS["SQUALL_API_TOKEN"])
    try:
        yield client
    finally:
        client.close()
        compose("down", "-v", timeout_s=300)


def all_healthy() -> bool:
    return all(healthy(s) for s in HEALTHY)


def targets() -> list[dict[str, Any]]:
    r = httpx.get(f"http://127.0.0.1:{PORTS['SQUALL_PROMETHEUS_PORT']}/api/v1/targets",
                  timeout=10)
    return list(r.json()["data"]["activeTargets"])


def counted(url: str, tid: str) -> Counter[str]:
    try:
        return state_counts(url, tid)
    except SquallError:  # its table is made with its first batch
        return Counter()


def targets_up() -> bool:
    try:
        ts = targets()
    except (httpx.HTTPError, ValueError, KeyError):
        return False
    jobs = {t["labels"]["job"] for t in ts}
    # The API, the three workers and their task processes (a spout, an acker and a bolts
    # process at least), every one up.
    return {"squall-api", "squall-tasks"} <= jobs and len(ts) >= 7 and \
        all(t["health"] == "up" for t in ts)


def test_the_compose_stack_counts_exactly_and_survives_a_restart(stack: ApiClient) -> None:
    await_(all_healthy, 600, "every service healthy")
    state = (f"postgresql://squall:{SECRETS['SQUALL_POSTGRES_PASSWORD']}@127.0.0.1:"
             f"{PORTS['SQUALL_TEST_POSTGRES_PORT']}/squall")
    tid = str(stack.submit(demo_topology("kafka:9092").to_json())["id"])
    await_(lambda: all(b["running"] for b in stack.storm_topology(tid)["bolts"]), 600,
           "the bolts running")
    truth = feed(10_000, seed=1)
    await_(lambda: counted(state, tid) == truth, 600, "the counts of 10,000 sentences")
    await_(targets_up, 120, "every Prometheus target up")

    # Every service stops and starts again, the broker with its volume.
    compose("restart", *HEALTHY)
    await_(all_healthy, 600, "every service healthy after the restart")
    truth += feed(2_000, seed=2)
    await_(lambda: counted(state, tid) == truth, 600,
           "the counts of all 12,000 sentences after the restart")
    await_(targets_up, 120, "every Prometheus target up after the restart")
