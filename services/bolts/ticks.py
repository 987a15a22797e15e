"""The driver's side of tick tuples (squall/core/topology/ticks.py): each ticked bolt's tick,
when due, goes as a record to the first input topic of its chain's head, one a partition
whose task hands it on (all of them for the head's own).

A tick that cannot be sent (the broker away) is skipped with a warning, not queued: the
next is due an interval later, and ticks are not tracked.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.ticks import TickSchedule, tick_routes
from squall.core.wire.tuple_batch import encode_tuples, tick_batch
from squall.kafka_clients import KafkaClients

log = logging.getLogger("squall.bolts.ticks")


class Ticker:
    def __init__(self, spec: TopologySpec, plan: Sequence[Sequence[str]],
                 clients: KafkaClients) -> None:
        """``plan``: the job's chains, head first (squall/core/topology/chains.py)."""
        #: per ticked bolt: its chain's head's first input topic, the partitions its ticks
        #: go to, the tick
        self.targets: dict[str, tuple[str, list[int], bytes]] = {}
        freq: dict[str, float] = {}
        for chain in plan:
            head = spec.component(chain[0])
            assert isinstance(head, BoltSpec)  # a chain is bolts only
            for name in chain:
                b = spec.component(name)
                if not isinstance(b, BoltSpec) or b.tick_s is None:
                    continue
                freq[name] = b.tick_s
                routes = tick_routes(head.parallelism, b.parallelism)
                tick = tick_batch(b.tick_s, "" if name == head.name else name)
                self.targets[name] = (spec.input_topics(head.name)[0], sorted(routes),
                                      encode_tuples(tick))
        self.schedule = TickSchedule(freq)
        self._producer: Any = clients.producer({"linger.ms": 0}) if freq else None

    def step(self, now_ms: int) -> list[str]:
        """Send the ticks due now; the bolts they went to."""
        if self._producer is None:
            return []
        from confluent_kafka import KafkaException

        sent = []
        for bolt in self.schedule.due(now_ms):
            topic, partitions, payload = self.targets[bolt]
            try:
                for p in partitions:
                    self._producer.produce(topic, payload, partition=p,
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
