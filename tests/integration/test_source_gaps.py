"""Real gaps in a source partition, on Apache Kafka: the offsets a transaction's commit or
abort marker takes, and those a compacted topic's cleaner removed. The spout reads with
``isolation.level=read_committed`` (librdkafka's default) and processes every record it is
given once; it commits past a gap between records at once (squall/core/reliability/
offsets.py: a gap is no pending offset), and past the offsets after the last record as its
consumer's position passes them: a partition is committed to its end."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

from squall.kafka_clients import KafkaClients
from tests.integration.helpers import wait_for
from tests.integration.test_spout import PARTS, rig_factory  # noqa: F401 - the fixture

pytestmark = pytest.mark.integration


def ends(bootstrap: str, topic: str) -> list[int]:
    c = KafkaClients(bootstrap).consumer({"group.id": f"squall-ends-{uuid.uuid4().hex[:6]}"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTS)]
    finally:
        c.close()


def read_all(bootstrap: str, topic: str) -> list[Any]:
    c = KafkaClients(bootstrap).consumer({"group.id": f"squall-peek-{uuid.uuid4().hex[:6]}",
                                          "enable.auto.commit": False,
                                          "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    out: list[Any] = []
    done: set[int] = set()
    try:
        deadline = time.monotonic() + 30
        while len(done) < PARTS and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(m)
                else:
                    done.add(m.partition())
        return out
    finally:
        c.close()


def test_a_transactional_source_is_read_committed_and_committed_past_its_markers(
        rig_factory: Any) -> None:  # noqa: F811 - the fixture
    rig = rig_factory(0)
    p = Producer({"bootstrap.servers": rig.bootstrap, "transactional.id": f"tx-{rig.topo}",
                  "linger.ms": 5})
    p.init_transactions(30)
    kept: list[bytes] = []
    aborted: list[bytes] = []
    for t in range(9):
        p.begin_transaction()
        values = [f"t{t}-{i}".encode() for i in range(20)]
        for i, v in enumerate(values):
            p.produce(rig.source, v, partition=i % PARTS)
        assert p.flush(30) == 0  # in the log before the abort (which drops what is queued)
        if t % 3 == 1:
            p.abort_transaction(30)
            aborted += values
        else:
            p.commit_transaction(30)
            kept += values
    end = ends(rig.bootstrap, rig.source)
    # Each transaction left a marker in each partition: the ends are past the records.
    assert sum(end) == len(kept) + len(aborted) + 9 * PARTS
    with rig.acker.start(), rig.bolt(lambda v, n: "ack") as bolt, rig.spout():
        wait_for(lambda: rig.committed() == end, 30,
                 f"each partition committed to its end {end}, past every marker")
    assert set(bolt.seen) == set(kept)  # nothing of an aborted transaction
    assert all(n == 1 for n in bolt.seen.values()), bolt.seen


def test_a_compacted_source_is_committed_past_what_its_cleaner_removed(
        rig_factory: Any) -> None:  # noqa: F811 - the fixture
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined,unused-ignore]

    rig = rig_factory(0)
    topic = f"compacted-{rig.topo}"
    admin = KafkaClients(rig.bootstrap).admin()
    conf = {"cleanup.policy": "compact", "segment.ms": "100", "min.compaction.lag.ms": "0",
            "min.cleanable.dirty.ratio": "0.001", "delete.retention.ms": "100"}
    for fut in admin.create_topics([NewTopic(topic, PARTS, 1, config=conf)]).values():
        fut.result(30)
    p = Producer({"bootstrap.servers": rig.bootstrap, "linger.ms": 0})
    for i in range(200):  # ten keys, each written over and over
        p.produce(topic, f"{i % 10}-{i}".encode(), key=f"k{i % 10}".encode(),
                  partition=(i % 10) % PARTS)
    assert p.flush(30) == 0

    def cleaned() -> bool:
        # A record more rolls the segment the others are in: the cleaner never takes the
        # active one.
        p.produce(topic, b"roll", key=b"roll", partition=0)
        p.produce(topic, b"roll", key=b"roll", partition=1)
        p.flush(10)
        return len(read_all(rig.bootstrap, topic)) < 150
    wait_for(cleaned, 90, "the log cleaner to compact the topic", every_s=2.0)
    survivors = [m.value() for m in read_all(rig.bootstrap, topic)]
    end = ends(rig.bootstrap, topic)
    assert len(survivors) < sum(end)  # there are gaps
    rig.spout_args[rig.spout_args.index("--topics") + 1] = topic
    rig.source = topic
    with rig.acker.start(), rig.bolt(lambda v, n: "ack") as bolt, rig.spout():
        wait_for(lambda: rig.committed() == end, 60,
                 f"each partition committed to its end {end}, past every removed offset")
    seen = {v: n for v, n in bolt.seen.items() if v != b"roll"}
    assert set(seen) == {v for v in survivors if v != b"roll"}
    assert all(n == 1 for n in seen.values()), seen
