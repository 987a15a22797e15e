"""A worker's watch on Kafka: whether it can still get a write acknowledged
(squall/kafka_reach.py), what a worker cut off from the brokers while it keeps its ZooKeeper
session needs to know to give its tasks up (squall/core/control/fencing.py).

A broker's death stops every write for a while: its partitions have no leader, and those it
follows wait for it (``acks=all`` waits for the whole ISR) until the controller fences it,
Kafka's ``broker.session.timeout.ms`` (9 s) after its last heartbeat, and after a new
controller's election if it was the active one. The worker's grace outlasts that (15 s at
least), or one broker's death would make every worker leave the cluster. Other workers'
rounds acknowledged while its own are not tell it sooner that the cut is its own
(squall/core/control/fencing.py, :func:`others_acknowledged`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from services.worker.kafka_peers import KafkaPeers
from squall.core.control.fencing import others_acknowledged
from squall.kafka_clients import KafkaClients
from squall.kafka_reach import Reach


class KafkaWatch(threading.Thread):
    """Calls ``report(reachable, at_ms, others)`` after every probe, each ``interval_s``:
    ``at_ms`` is when the probe's writes were sent (``clock``'s milliseconds), so that a cut is
    counted from there, not from the end of a probe that waited its whole timeout. Each
    acknowledged round is counted for the peers to read (services/worker/kafka_peers.py).
    Once a round went unacknowledged, some peers' counts are read, and read again every
    ``check_s`` until one of this worker's rounds is acknowledged: ``others`` says whether a
    peer's went on meanwhile, reported as soon as seen."""

    def __init__(self, clients: KafkaClients, report: Callable[[bool, int, bool], None],
                 clock: Callable[[], int], peers: KafkaPeers | None = None,
                 interval_s: float = 2.0, timeout_s: float = 5.0,
                 check_s: float = 0.5) -> None:
        super().__init__(daemon=True, name="kafka-watch")
        self.reach = Reach(clients, timeout_s)
        self.report, self.clock, self.peers = report, clock, peers
        self.interval_s, self.timeout_s, self.check_s = interval_s, timeout_s, check_s
        self.stop = threading.Event()
        #: the peers' counts when this worker's first unacknowledged round failed
        self._before: dict[str, tuple[int, int]] | None = None

    def run(self) -> None:
        while not self.stop.is_set():
            sent_ms = self.clock()
            r = self.reach.send()
            deadline = time.monotonic() + self.timeout_s + 1
            while (ok := r.wait(self.check_s)) is None and time.monotonic() < deadline:
                self._check(sent_ms)
            if ok:
                self._before = None
                if self.peers is not None:
                    self.peers.acknowledged()
                self.report(True, sent_ms, False)
            else:
                if self._before is None and self.peers is not None:
                    self._before = self.peers.sample()
                self.report(False, sent_ms, self._others())
            until = time.monotonic() + self.interval_s
            while not self.stop.wait(max(0.0, min(self.check_s, until - time.monotonic()))) \
                    and time.monotonic() < until:
                self._check(sent_ms)

    def _others(self) -> bool:
        before = self._before
        if not before or self.peers is None:
            return False
        return others_acknowledged(before, self.peers.sample(list(before)))

    def _check(self, sent_ms: int) -> None:
        """While in doubt, a peer's rounds acknowledged meanwhile are reported at once."""
        if self._before and self._others():
            self.report(False, sent_ms, True)
