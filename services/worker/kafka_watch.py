"""A worker's watch on Kafka: whether it can still get a write acknowledged
(squall/kafka_reach.py), what a worker cut off from the brokers while it keeps its ZooKeeper
session needs to know to give its tasks up (squall/core/control/fencing.py).

A broker's death stops every write for a while: its partitions have no leader, and those it
follows wait for it (``acks=all`` waits for the whole ISR) until the controller fences it,
Kafka's ``broker.session.timeout.ms`` (9 s) after its last heartbeat, and after a new
controller's election if it was the active one. The worker's grace outlasts that (15 s at
least), or one broker's death would make every worker leave the cluster."""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.worker.kafka_peers import KafkaPeers
from squall.core.control.fencing import others_acknowledged
from squall.kafka_clients import KafkaClients
from squall.kafka_reach import Reach


class KafkaWatch(threading.Thread):
    """Calls ``report(reachable, at_ms, others)`` after every probe, each ``interval_s``:
    ``at_ms`` is when the probe's writes were sent (``clock``'s milliseconds), so that a cut is
    counted from there, not from the end of a probe that waited its whole timeout;
    ``others``: some peer's probes were acknowledged meanwhile (services/worker/
    kafka_peers.py). Each acknowledged round is counted for the peers to read."""

    def __init__(self, clients: KafkaClients, report: Callable[[bool, int, bool], None],
                 clock: Callable[[], int], peers: KafkaPeers | None = None,
                 interval_s: float = 2.0, timeout_s: float = 5.0) -> None:
        super().__init__(daemon=True, name="kafka-watch")
        self.reach = Reach(clients, timeout_s)
        self.report, self.clock, self.peers = report, clock, peers
        self.interval_s = interval_s
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            before = self.peers.sample() if self.peers is not None else {}
            sent_ms = self.clock()
            reachable = self.reach.probe()
            others = False
            if self.peers is not None:
                if reachable:
                    self.peers.acknowledged()
                elif before:
                    others = others_acknowledged(before, self.peers.sample())
            self.report(reachable, sent_ms, others)
            self.stop.wait(self.interval_s)
