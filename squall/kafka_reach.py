"""Whether this process can still get a write acknowledged by Kafka: the one test of being
cut off from the brokers, shared by a worker (services/worker/kafka_watch.py) and a bolt
task's executor (services/bolts/kafka_fence.py).

One small record goes to each partition of the health topic with ``acks=all``; Kafka is
reachable if at least one is acknowledged within the timeout. A metadata request would not
do: a broker cut off from the others still answers it, from what it last knew, and so would
the host's own broker. An acknowledged write needs a partition leader that the controllers
still count and ``min.insync.replicas`` replicas, which is what the tasks need too.

A broker that refuses the write (no ACL on the health topic, docs/kafka.md) answered: that
counts as reachable, and the refusal is logged once per process."""

from __future__ import annotations

import logging
import time
from typing import Any

from squall.core.topology.topics import HEALTH_PARTITIONS, HEALTH_TOPIC
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients, quiet_logger

log = logging.getLogger("squall.kafka")

#: Kafka's errors that are a broker's answer, not its silence.
ANSWERS = ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED",
           "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART")

_refused_logged = False


def answered(error: str) -> bool:
    """Whether ``error`` (a Kafka error's name or text) is a broker's refusal, not silence."""
    global _refused_logged
    said = any(a in error for a in ANSWERS)
    if said and not _refused_logged:
        _refused_logged = True
        log.error("Kafka refuses writes to %s (%s): this process cannot tell whether it is "
                  "cut off from the brokers, so it never gives its tasks up for that; grant "
                  "Write on the topic (docs/kafka.md)", HEALTH_TOPIC, error)
    return said


class Round:
    """One probe's writes: :meth:`wait` says whether any was acknowledged (or refused)."""

    def __init__(self, producer: Any, writes: int, settled: bool | None = None) -> None:
        self.producer, self.writes = producer, writes
        self.outcomes: list[str | None] = []
        self.settled = settled

    def done(self, err: Any, _msg: Any) -> None:
        self.outcomes.append(None if err is None else err.name())

    def wait(self, timeout_s: float) -> bool | None:
        """True once a write is acknowledged (or refused), False once every write failed
        (each fails at the producer's message timeout), None while neither after
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.settled is None:
            if any(o is None or answered(o) for o in self.outcomes):
                self.settled = True
            elif len(self.outcomes) >= self.writes:
                self.settled = False
            elif (left := deadline - time.monotonic()) <= 0:
                return None
            else:
                self.producer.poll(min(left, 0.1))
        return self.settled


class Reach:
    """One process's probe: :meth:`send` makes the health topic and its producer on first
    use, then writes one round."""

    def __init__(self, clients: KafkaClients, timeout_s: float = 5.0) -> None:
        self.clients, self.timeout_s = clients, timeout_s
        self.partitions = HEALTH_PARTITIONS
        self._producer: Any = None

    def send(self) -> Round:
        """One write to each health partition, not waited for."""
        try:
            if self._producer is None:
                ensure_topics(self.clients, {HEALTH_TOPIC: HEALTH_PARTITIONS},
                              self.timeout_s, quiet=True)
                # as many as it has (an operator may have made it with fewer)
                self.partitions = len(self.clients.metadata(self.timeout_s)
                                      .topics[HEALTH_TOPIC].partitions)
                ms = int(self.timeout_s * 1000)
                self._producer = self.clients.producer({
                    "acks": "all", "linger.ms": 0, "message.timeout.ms": ms,
                    "request.timeout.ms": ms, "logger": quiet_logger("kafka-reach")})
        except Exception as e:  # the brokers unreachable at the start, or a denial
            log.debug("Kafka reach: %s", e)
            return Round(None, 0, settled=answered(str(e)))
        r = Round(self._producer, self.partitions)
        for p in range(self.partitions):
            self._producer.produce(HEALTH_TOPIC, b"", partition=p, on_delivery=r.done)
        return r

    def probe(self) -> bool:
        """One round, waited for: whether any write was acknowledged (or refused)."""
        return bool(self.send().wait(self.timeout_s + 1))
