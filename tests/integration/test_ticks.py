"""Tick tuples on the real stack: a word count that emits only on ticks
(examples/ticks.py) flushes every word once its input has stopped, through Kafka and Spark."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from examples.ticks import topology
from squall.core.wire.tuple_batch import decode_tuples
from squall.kafka import ensure_topics
from tests.integration.helpers import (
    clients,
    committed_offsets,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)

pytestmark = pytest.mark.integration
PARTS = 2


def test_a_tick_driven_bolt_flushes_what_it_counted(bootstrap: str, tmp_path: Path) -> None:
    name = f"tk{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    spec = topology(name, source, every_s=1)
    ensure_topics(clients(bootstrap), {source: PARTS})
    lines = [f"tick tock {i % 11} clock".encode() for i in range(400)]
    truth = Counter(w for s in lines for w in s.decode().split())
    (out_edge,) = spec.edges_from("count")  # what "log" would read: the test reads it

    acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, ["split", "count"],
                                            f"sqlite://{tmp_path / 'state.db'}")
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                       "enable.auto.commit": False})
    reader.assign([TopicPartition(out_edge.topic, 0, 0)])
    emitted: Counter[str] = Counter()
    tracked = flushes = 0

    def read() -> Counter[str]:
        nonlocal tracked, flushes
        for m in reader.consume(200, 0.2):
            if m.error():
                continue
            b = decode_tuples(m.value() or b"")
            flushes += 1
            for t in b.tuples():
                emitted[t["word"]] += t["count"]
                tracked += t.tracked
        return emitted

    def committed() -> int:
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{name}.sentences", source, PARTS))

    try:
        with acker.start(), bolts.start():
            wait_for_queries(bolts)
            produce_source(bootstrap, source, lines, PARTS)
            with spout.start():
                # the words are acked as they are counted: the trees complete at once
                wait_for(lambda: committed() >= len(lines), 240, "every sentence committed",
                         every_s=0.5, explain=lambda: bolts.log_tail(60))
            # no more input: only ticks make the counts come out
            wait_for(lambda: read() == truth, 60, "every word flushed by a tick",
                     every_s=0.2, explain=lambda: f"{dict(emitted)} != {dict(truth)}\n"
                     + bolts.log_tail(40))
    finally:
        reader.close()
    assert emitted == truth
    assert tracked == 0, "a tick-driven emit is untracked"
    assert flushes >= 1
