"""The real stack, once per session: Apache Kafka, ZooKeeper, PostgreSQL (and Spark, in later
suites)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.telemetry import TOKEN_ENV as TELEMETRY_TOKEN_ENV
from squall.core.control.spark_security import SECRET_ENV as SPARK_SECRET_ENV
from squall.core.control.zookeeper_access import AUTH
from squall.dev.stack import EmbeddedStack, StackInfo, StackSettings
from tests.integration.cluster import (
    SPARK_SECRET,
    TELEMETRY_TOKEN,
    ZK_AUTH,
    ApiProcess,
    namespace,
)
from tests.integration.helpers import ServiceProcess, wait_for

# Every process the suite starts inherits them: Squall's tree is protected in every test,
# the telemetry ports' answers but /metrics need their token, and a bolts job on a Spark
# cluster authenticates to it and encrypts its RPC.
os.environ[AUTH] = ZK_AUTH
os.environ[TELEMETRY_TOKEN_ENV] = TELEMETRY_TOKEN
os.environ[SPARK_SECRET_ENV] = SPARK_SECRET


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    home = tmp_path_factory.mktemp("stack")
    with EmbeddedStack(StackSettings(home=home, start_timeout_s=90, postgres=True)) as info:
        yield info


@pytest.fixture
def own_stack(tmp_path: Path) -> Iterator[StackInfo]:
    """A stack of its own, for a test that freezes its ZooKeeper or its broker: that would
    disturb the other tests of the session's stack."""
    with EmbeddedStack(StackSettings(home=tmp_path / "stack", start_timeout_s=90)) as info:
        yield info


@pytest.fixture(scope="session")
def bootstrap(stack: StackInfo) -> str:
    return stack.bootstrap_servers


@pytest.fixture(scope="session")
def zookeeper(stack: StackInfo) -> str:
    return stack.zookeeper


@pytest.fixture(scope="session")
def postgres_url(stack: StackInfo) -> str:
    assert stack.postgres is not None
    return stack.postgres


# ----- a Squall cluster of its own: API and workers (tests of the control plane) -----


def worker(kind: str, wid: str, zookeeper: str, bootstrap: str, tmp: Path) -> ServiceProcess:
    return ServiceProcess("services.worker", [
        "--kind", kind, "--worker-id", wid, "--zookeeper", zookeeper,
        "--bootstrap-servers", bootstrap, "--workdir", str(tmp / wid), "--capacity", "4",
        "--checkpoint-dir", str(tmp / "checkpoints"), "--session-timeout-s", "3",
        # Two quick exits make a crash loop here: each exit of a bolts job is a Spark start.
        "--master", "local[2]", "--crash-loop-after", "2"], tmp / f"{wid}.log")


@pytest.fixture
def cluster(zookeeper: str, bootstrap: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    zookeeper = namespace(zookeeper)  # a Squall cluster of its own on the shared ZooKeeper
    api = ApiProcess(zookeeper, bootstrap, tmp_path / "api.log").start()
    procs = {w: worker(k, w, zookeeper, bootstrap, tmp_path).start() for k, w in [
        ("acker", f"acker-{uuid.uuid4().hex[:4]}"), ("bolts", f"bolts-{uuid.uuid4().hex[:4]}"),
        ("spout", f"spoutA-{uuid.uuid4().hex[:4]}"), ("spout", f"spoutB-{uuid.uuid4().hex[:4]}")]}
    try:
        yield {"api": api, "workers": procs, "zookeeper": zookeeper}
    finally:
        for p in procs.values():
            p.stop()
        api.stop()


# ----- an API replica of a module's own (its own ZooKeeper namespace) -----


@pytest.fixture(scope="module")
def ns(zookeeper: str) -> str:
    """A test module's own Squall cluster on the shared ZooKeeper (a chroot)."""
    return namespace(zookeeper)


@pytest.fixture(scope="module")
def api(ns: str, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[ApiProcess]:
    p = ApiProcess(ns, bootstrap, tmp_path_factory.mktemp("api") / "api.log").start()
    wait_for(p.leads, 30, "the only replica to lead")
    yield p
    p.stop()
