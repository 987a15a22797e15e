"""The tail of a partition many producers write, read on the real broker with
``squall.kafka.contiguous``: every record once, in order.

A broker that answers a fetch with a record batch before an earlier one, written by another
producer at the same moment, is visible would lose those records for a consumer that moved
past the gap (squall/core/reliability/contiguity.py); the reader goes back and fetches again.
Apache Kafka shows a partition in order; either way every record comes once, in order.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from squall.core.reliability.contiguity import Contiguity
from squall.kafka import GAP_HOLD_MS, contiguous, ensure_topics
from tests.integration.helpers import clients

pytestmark = pytest.mark.integration

PRODUCERS, RATE, SECONDS = 8, 1_000, 20


def test_a_tail_read_gets_every_record_of_concurrent_producers_once(bootstrap: str) -> None:
    topic = f"gaps-{uuid.uuid4().hex[:8]}"
    ensure_topics(clients(bootstrap), {topic: 1}, 30)
    stop, sent = threading.Event(), [0] * PRODUCERS
    errors: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    def feed(k: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                      "enable.idempotence": True})
        t0 = time.perf_counter()
        while not stop.is_set():
            ahead = sent[k] / RATE - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
            p.produce(topic, f"{k}:{sent[k]}".encode(), partition=0, on_delivery=delivered)
            p.poll(0)
            sent[k] += 1
        assert p.flush(60) == 0

    feeds = [threading.Thread(target=feed, args=(k,), daemon=True) for k in range(PRODUCERS)]
    # 100 ms: the services' own fetch wait (squall.kafka.FETCH_WAIT_MS).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "fetch.wait.max.ms": 100,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    gaps = Contiguity[tuple[str, int]](GAP_HOLD_MS)
    gaps.expect((topic, 0), 0)
    offsets: list[int] = []
    values: set[bytes] = set()

    def read(until: float) -> None:
        while time.monotonic() < until:
            for m in contiguous(c, gaps, c.consume(1000, 0.1), int(time.monotonic() * 1000)):
                if m.error() is None:
                    offsets.append(m.offset())
                    values.add(m.value())

    for f in feeds:
        f.start()
    try:
        read(time.monotonic() + SECONDS)
    finally:
        stop.set()
        for f in feeds:
            f.join()
    total = sum(sent)
    deadline = time.monotonic() + 60
    while len(offsets) < total and time.monotonic() < deadline:
        read(time.monotonic() + 1)
    c.close()
    assert not errors
    assert offsets == list(range(total))  # none skipped, none twice, in order
    assert values == {f"{k}:{i}".encode() for k in range(PRODUCERS) for i in range(sent[k])}
