"""``squall.kafka.consume_ready`` on the real broker: it returns as soon as a message is
there, not when its batch is full or its timeout passed, and loses nothing.

``Consumer.consume(n, timeout)`` waits for ``n`` messages or the timeout: a service loop
that asks for many would wait out its timeout on every pass below full rate.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from squall.kafka import consume_ready, ensure_topics
from tests.integration.helpers import clients

pytestmark = pytest.mark.integration

#: Far longer than a fetch takes even on a loaded machine: returning well within it
#: means the call did not wait for its batch to fill.
LONG_S = 60.0


def _topic_and_consumer(bootstrap: str) -> tuple[str, Consumer]:
    topic = f"ready-{uuid.uuid4().hex[:8]}"
    ensure_topics(clients(bootstrap), {topic: 1}, 30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 20})
    c.assign([TopicPartition(topic, 0, 0)])
    return topic, c


def test_one_message_is_returned_without_waiting_for_a_full_batch(bootstrap: str) -> None:
    topic, c = _topic_and_consumer(bootstrap)
    try:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        p.produce(topic, b"only", partition=0)
        assert p.flush(30) == 0
        t0 = time.monotonic()
        got = consume_ready(c, 500, LONG_S)
        took = time.monotonic() - t0
        assert [m.value() for m in got] == [b"only"]
        assert took < LONG_S / 2, f"waited {took:.1f} s for a batch of 500"
    finally:
        c.close()


def test_nothing_there_waits_the_timeout_and_returns_nothing(bootstrap: str) -> None:
    _, c = _topic_and_consumer(bootstrap)
    try:
        t0 = time.monotonic()
        assert consume_ready(c, 500, 0.3) == []
        assert time.monotonic() - t0 >= 0.3
        assert consume_ready(c, 500, 0) == []
    finally:
        c.close()


@pytest.mark.parametrize("most", [1, 7, 1000])
def test_every_message_once_in_order_at_most_the_maximum_per_call(bootstrap: str,
                                                                 most: int) -> None:
    topic, c = _topic_and_consumer(bootstrap)
    try:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        sent = [f"m{i}".encode() for i in range(120)]
        for v in sent:
            p.produce(topic, v, partition=0)
        assert p.flush(30) == 0
        seen: list[bytes] = []
        deadline = time.monotonic() + LONG_S
        while len(seen) < len(sent) and time.monotonic() < deadline:
            got = consume_ready(c, most, 1.0)
            assert len(got) <= most
            seen += [m.value() for m in got if m.error() is None]
        assert seen == sent
        assert consume_ready(c, most, 0.1) == []
    finally:
        c.close()
