"""Whether this worker can still get a write acknowledged by Kafka: what a worker cut off
from the brokers while it keeps its ZooKeeper session needs to know to give its tasks up
(squall/core/control/fencing.py).

Every ``interval_s`` the watch writes one small record to each partition of the health
topic with ``acks=all``; it is reachable while at least one is acknowledged within
``timeout_s``. A metadata request would not do: a broker cut off from the others still
answers it, from what it last knew, and so would the host's own broker. An acknowledged
write needs a partition leader that the controllers still count and ``min.insync.replicas``
replicas, which is what the worker's tasks need too. A write to any partition is enough.

A broker's death stops every write for a while: its partitions have no leader, and those it
follows wait for it (``acks=all`` waits for the whole ISR) until the controller fences it,
Kafka's ``broker.session.timeout.ms`` (9 s) after its last heartbeat, and after a new
controller's election if it was the active one. The worker's grace outlasts that (15 s at
least), or one broker's death would make every worker leave the cluster.

A broker that refuses the write (no ACL on the health topic, docs/kafka.md) answered: that
counts as reachable, and the refusal is logged once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from squall.core.topology.topics import HEALTH_PARTITIONS, HEALTH_TOPIC
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients, quiet_logger

log = logging.getLogger("squall.worker")

#: Kafka's errors that are a broker's answer, not its silence.
_ANSWERS = ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
            "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART")


class KafkaWatch(threading.Thread):
    """Calls ``report(reachable)`` after every round of writes."""

    def __init__(self, clients: KafkaClients, report: Callable[[bool], None],
                 interval_s: float = 2.0, timeout_s: float = 5.0) -> None:
        super().__init__(daemon=True, name="kafka-watch")
        self.clients, self.report = clients, report
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self.stop = threading.Event()
        self.partitions = HEALTH_PARTITIONS
        self._refused = False

    def run(self) -> None:
        producer = None
        while not self.stop.is_set():
            try:
                if producer is None:
                    ensure_topics(self.clients, {HEALTH_TOPIC: HEALTH_PARTITIONS},
                                  self.timeout_s, quiet=True)
                    # as many as it has (an operator may have made it with fewer)
                    self.partitions = len(self.clients.metadata(self.timeout_s)
                                          .topics[HEALTH_TOPIC].partitions)
                    producer = self._producer()
                ok = self.round(producer)
            except Exception as e:  # the brokers unreachable at the start, or a denial
                ok = self._answered(str(e))
                if not ok:
                    log.debug("Kafka watch: %s", e)
            self.report(ok)
            self.stop.wait(self.interval_s)

    def _producer(self) -> Any:
        ms = int(self.timeout_s * 1000)
        return self.clients.producer({"acks": "all", "linger.ms": 0,
                                      "message.timeout.ms": ms, "request.timeout.ms": ms,
                                      "logger": quiet_logger("kafka-watch")})

    def round(self, producer: Any) -> bool:
        """One write to each health partition; whether any was acknowledged (or refused)."""
        outcomes: list[str | None] = []

        def done(err: Any, _msg: Any) -> None:
            outcomes.append(None if err is None else err.name())

        for p in range(self.partitions):
            producer.produce(HEALTH_TOPIC, b"", partition=p, on_delivery=done)
        producer.flush(self.timeout_s + 1)
        return any(o is None or self._answered(o) for o in outcomes)

    def _answered(self, error: str) -> bool:
        answered = any(a in error for a in _ANSWERS)
        if answered and not self._refused:
            self._refused = True
            log.error("Kafka refuses the worker's writes to %s (%s): the worker cannot tell "
                      "whether it is cut off from the brokers, so it never stops its tasks "
                      "for that; grant Write on the topic (docs/kafka.md)", HEALTH_TOPIC, error)
        return answered
