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
from kazoo.exceptions import NoAuthError

from services.worker.kafka_peers import KafkaPeers
from services.worker.kafka_watch import KafkaWatch
from squall.coord import KAFKA_REACH, WORKERS, connect
from squall.core.control.fencing import others_acknowledged
from squall.core.control.zookeeper_access import access_from
from squall.dev.stack import StackInfo
from squall.kafka_clients import KafkaClients
from squall.processes import free_port
from tests.integration.cluster import ApiProcess, namespace, zk_client
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


def test_workers_see_each_others_acknowledged_kafka_rounds_in_zookeeper(
        zookeeper: str) -> None:
    """What a worker cut off from Kafka alone reads (services/worker/kafka_peers.py), on a
    real ZooKeeper: a peer's rounds counted since a reading are seen; a peer that restarted
    (a new session: a node made anew) is no evidence; one without Squall's identity can
    neither forge a count nor add a peer; a worker whose own writes go
    unanswered reports a peer's rounds as they go on; and a worker that lost ZooKeeper's
    connection reads nothing and counts nothing, without waiting on it."""
    ns = namespace(zookeeper)
    clients = {w: connect(ns, timeout_s=10, access=access_from(os.environ))
               for w in ("w1", "w2", "w3")}
    peers = {w: KafkaPeers(lambda w=w: clients[w], w) for w in clients}  # type: ignore[misc]
    try:
        for p in peers.values():
            p.acknowledged()
        before = peers["w1"].sample()
        assert set(before) == {"w2", "w3"}  # not itself
        peers["w2"].acknowledged()
        assert not others_acknowledged(before, peers["w1"].sample())  # may predate w1's
        peers["w2"].acknowledged()
        assert others_acknowledged(before, peers["w1"].sample())
        # w3 restarts: its node goes with its session and comes back as another incarnation
        clients["w3"].stop()
        clients["w3"].close()
        clients["w3"] = connect(ns, timeout_s=10, access=access_from(os.environ))
        for _ in range(3):
            peers["w3"].acknowledged()
        again = peers["w1"].sample()
        assert again["w3"][0] != before["w3"][0]
        assert not others_acknowledged({"w3": before["w3"]}, again)
        # w1's own watch, no broker answering it: it reports, while its round is still
        # unanswered, that a peer's rounds go on
        reports: list[tuple[bool, int, bool]] = []
        watch = KafkaWatch(KafkaClients(f"127.0.0.1:{free_port()}"),
                           lambda *r: reports.append(r), lambda: 0, peers["w1"],
                           interval_s=60.0, timeout_s=1.0, check_s=0.1)
        watch.start()
        try:
            wait_for(lambda: bool(reports), 30, "the first round's word")
            assert reports[0][:2] == (False, 0) and not reports[0][2]

            def others_seen() -> bool:
                peers["w2"].acknowledged()
                return any(r[2] for r in reports)
            wait_for(others_seen, 30, "the peer's rounds seen", every_s=0.2)
            assert all(not r[0] for r in reports)
        finally:
            watch.stop.set()
        acls = clients["w1"].get_acls(f"{KAFKA_REACH}/w1")[0]
        assert acls == clients["w1"].get_acls(KAFKA_REACH)[0]  # Squall's own ACL
        outsider = zk_client(ns, identity=None)  # no count forged, none made
        try:
            with pytest.raises(NoAuthError):
                outsider.set(f"{KAFKA_REACH}/w2", b"")
            with pytest.raises(NoAuthError):
                outsider.create(f"{KAFKA_REACH}/forged", b"", ephemeral=True)
        finally:
            outsider.stop()
            outsider.close()
        clients["w1"].stop()  # no connection: nothing read, nothing counted, no wait
        assert peers["w1"].sample() == {}
        peers["w1"].acknowledged()
    finally:
        for zk in clients.values():
            zk.stop()
            zk.close()
