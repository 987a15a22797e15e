"""The worker's Kafka fence, for real: the broker frozen (SIGSTOP) under a worker run with
--kafka-fence-after-s. No write of its is acknowledged, so once the grace is out it kills its
task processes and leaves the cluster (its ZooKeeper node goes, and the leader moves its
units); once the broker answers again it registers anew and runs what it is then assigned
(services/worker/kafka_watch.py)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from squall.coord import WORKERS
from squall.dev.stack import StackInfo
from tests.integration.cluster import ApiProcess, zk_client
from tests.integration.helpers import acker_worker, run_ackers_only, wait_for

pytestmark = pytest.mark.integration

#: The least grace the worker takes.
GRACE_S = 15


def test_a_worker_no_broker_answers_leaves_the_cluster_and_comes_back_once_one_does(
        own_stack: StackInfo, tmp_path: Path) -> None:
    broker = next(p.pid for p in own_stack.processes if p.name.startswith("kafka"))
    api = ApiProcess(own_stack.zookeeper, own_stack.bootstrap_servers,
                     tmp_path / "api.log").start()
    worker = acker_worker(own_stack, tmp_path, "acker-kf", "--kafka-fence-after-s", str(GRACE_S))
    procs = "squall_worker_processes{kind=acker,worker=acker-kf}"
    zk = zk_client(own_stack.zookeeper)
    http = api.client()

    def session() -> str | None:
        """The worker's registration in ZooKeeper (None: not registered)."""
        node = f"{WORKERS}/acker-kf"
        return str(json.loads(zk.get(node)[0])["session"]) if zk.exists(node) else None

    try:
        run_ackers_only(http, worker, "acker-kf", 60)
        first = session()
        assert first
        os.kill(broker, signal.SIGSTOP)
        try:
            wait_for(lambda: session() is None, GRACE_S + 60, "the worker to leave",
                     every_s=0.5)
            wait_for(lambda: worker.metrics().get(procs) == 0, 30, "its task killed")
            assert "no write acknowledged by Kafka" in worker.log_tail(100)
        finally:
            os.kill(broker, signal.SIGCONT)
        wait_for(lambda: session() not in (None, first), 90, "the worker to register again",
                 every_s=0.5)
        # the leader writes an assignment for the new registration, and the worker runs it
        wait_for(lambda: worker.metrics().get(procs) == 1, 90, "the acker task again")
        assert worker.alive()
    finally:
        http.close()
        zk.stop()
        zk.close()
        worker.stop()
        api.stop()
