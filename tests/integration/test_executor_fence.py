"""On a real Spark standalone cluster (two workers): a task whose executor cannot get a write
acknowledged by Kafka gives up with the fence's marker, its retry runs on the other executor,
the driver removes the executor it failed on without a replacement, and asks for executors
again after the rejoin delay. The last executor is never removed, and a task that fails for
any other reason removes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.bolts.runtime.session import FENCES, Fencing, spark_session
from squall.core.control.spark_security import SECRET_ENV as SPARK_SECRET_ENV
from squall.dev.spark import SparkCluster
from squall.processes import die_with_parent, free_port
from tests.integration.cluster import SPARK_SECRET
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration
#: Long enough for a job on the one executor left to run before the other is asked back.
REJOIN_S = 30.0


# Nested, so that Spark ships them by value (the executors cannot import the tests).
def _cut_off_on_first_attempt(nowhere: str) -> Any:
    def run(rows: Iterator[int]) -> Iterator[int]:
        from pyspark import TaskContext

        from services.bolts.kafka_fence import ExecutorFence
        from squall.kafka_clients import KafkaClients
        from squall.kafka_reach import Reach

        ctx = TaskContext.get()
        assert ctx is not None
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            # Kafka where nothing listens: every probe goes unacknowledged.
            fence = ExecutorFence(Reach(KafkaClients(nowhere), timeout_s=1.0).probe, 2.0)
            while True:
                fence.waiting("a range")
        yield from rows
    return run


def _fails_once() -> Any:
    def run(rows: Iterator[int]) -> Iterator[int]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
            raise ValueError("a bolt's own error")
        yield from rows
    return run


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    with SparkCluster(tmp_path_factory.mktemp("spark"), workers=2, secret=SPARK_SECRET) as c:
        yield c


@pytest.fixture(scope="module")
def session(cluster: SparkCluster) -> Iterator[Any]:
    spark = spark_session(cluster.master_url, "squall-fence-test", java_options="-Xss4m",
                          fence=Fencing(grace_s=15.0, rejoin_s=REJOIN_S))
    try:
        yield spark
    finally:
        spark.stop()


INTRUDER = """
from pyspark.sql import SparkSession
SparkSession.builder.master({master!r}).appName("intruder").getOrCreate()
"""


def test_a_driver_without_the_secret_is_refused_and_nothing_takes_submissions(
        cluster: SparkCluster, tmp_path: Path) -> None:
    """The cluster authenticates every party (squall/core/control/spark_security.py): a
    driver that does not hold the secret is refused at its first message and registers no
    application; and the master's REST submission server, which would take a driver from
    anyone, is not listening."""
    env = {k: v for k, v in os.environ.items() if k != SPARK_SECRET_ENV}
    log = tmp_path / "intruder.log"
    with open(log, "wb") as out:
        intruder = subprocess.Popen([sys.executable, "-c", INTRUDER.format(
            master=cluster.master_url)], stdout=out, stderr=subprocess.STDOUT, env=env,
            preexec_fn=die_with_parent)
    try:
        wait_for(lambda: "does not have SASL enabled" in log.read_text(errors="replace")
                 or intruder.poll() is not None, 120, "the intruder to be refused",
                 explain=lambda: log.read_text(errors="replace")[-2000:])
        assert "does not have SASL enabled" in log.read_text(errors="replace")
    finally:
        intruder.kill()
        intruder.wait(30)
    master = (cluster.home / "master.log").read_text(errors="replace")
    assert "Registering app intruder" not in master
    assert "REST server" not in master and "authentication enabled" in master


def _executors(sc: Any) -> int:
    return int(sc._jsc.sc().getExecutorIds().size())


def _settled(sc: Any) -> None:
    assert sc._jsc.sc().listenerBus().waitUntilEmpty(30_000) is None


def test_an_executor_cut_off_from_kafka_leaves_the_job_and_is_asked_back(
        session: Any, tmp_path: Path) -> None:
    sc = session.sparkContext
    fence = FENCES[sc.applicationId]
    wait_for(lambda: _executors(sc) == 2, 120, "both executors")

    got = sc.parallelize(range(100), 2).mapPartitions(_fails_once()).collect()
    assert sorted(got) == list(range(100))
    _settled(sc)
    assert fence.named() == 0, "a bolt's own error removed an executor"
    assert _executors(sc) == 2

    nowhere = f"127.0.0.1:{free_port()}"
    got = sc.parallelize(range(100), 2).mapPartitions(_cut_off_on_first_attempt(nowhere)).collect()
    assert sorted(got) == list(range(100)), "the retry on the other executor did not finish"
    _settled(sc)
    assert fence.named() == 1
    wait_for(lambda: fence.removed() == 1 and _executors(sc) == 1, 60,
             "the executor cut off removed, with no replacement")

    # The last executor says it too: Kafka is down for all, and it stays.
    got = sc.parallelize(range(10), 1).mapPartitions(_cut_off_on_first_attempt(nowhere)).collect()
    assert sorted(got) == list(range(10))
    wait_for(lambda: fence.kept() == 1, 60, "the last executor kept")
    assert fence.removed() == 1

    wait_for(lambda: _executors(sc) == 2, 120, "an executor asked for again after the delay")
