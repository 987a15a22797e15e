"""The driver's side of tick tuples (squall/core/topology/ticks.py): each ticked bolt's tick,
when due, goes to every task of it as a record of its first input's edge topic.

A tick that cannot be sent (the broker away) is skipped with a warning, not queued: the
next is due an interval later, and ticks are not tracked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.ticks import TickSchedule
from squall.core.wire.tuple_batch import encode_tuples, tick_batch
from squall.kafka_clients import KafkaClients

log = logging.getLogger("squall.bolts.ticks")


class Ticker:
    def __init__(self, spec: TopologySpec, bolts: Sequence[BoltSpec],
                 clients: KafkaClients) -> None:
        ticked = {b.name: (b, b.tick_s) for b in bolts if b.tick_s is not None}
        self.schedule = TickSchedule({n: f for n, (_, f) in ticked.items()})
        # a tick goes where the bolt's first input comes from: one partition per task
        self.targets = {n: (spec.input_topics(n)[0], b.parallelism, encode_tuples(tick_batch(f)))
                        for n, (b, f) in ticked.items()}
        self._producer: Any = clients.producer({"linger.ms": 0}) if ticked else None

    def step(self, now_ms: int) -> list[str]:
        """Send the ticks due now; the bolts they went to."""
        if self._producer is None:
            return []
        from confluent_kafka import KafkaException

        sent = []
        for bolt in self.schedule.due(now_ms):
            topic, tasks, payload = self.targets[bolt]
            try:
                for task in range(tasks):
                    self._producer.produce(topic, payload, partition=task,
                                           on_delivery=self._delivered)
                sent.append(bolt)
            except (BufferError, KafkaException) as e:
                log.warning("tick of bolt %r not sent (%s): the next is due in %.0f s", bolt,
                            e, self.schedule.freq_s[bolt])
        self._producer.poll(0)
        return sent

    @staticmethod
    def _delivered(err: Any, msg: Any) -> None:
        if err is not None:
            log.warning("a tick to %s[%s] was not delivered: %s", msg.topic(), msg.partition(),
                        err)

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
