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

from squall.kafka import consume_ready, ensure_topics, paced_fetches
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


def _fetches_while_reading(bootstrap: str, extra: dict[str, int], seconds: float) -> tuple[
        int, int]:
    """Fetch requests a consumer sent while a producer wrote a record every 2 ms and the
    consumer read everything it could (librdkafka's statistics), and the records read."""
    import json
    import threading

    topic = f"paced-{uuid.uuid4().hex[:8]}"
    ensure_topics(clients(bootstrap), {topic: 1}, 30)
    stats: list[dict[str, object]] = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False,
                  "fetch.wait.max.ms": 20, "statistics.interval.ms": 100,
                  "stats_cb": lambda s: stats.append(json.loads(s)), **extra})
    c.assign([TopicPartition(topic, 0, 0)])
    stop = threading.Event()

    def feed() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        while not stop.wait(0.002):
            p.produce(topic, b"x", partition=0)
            p.poll(0)
        p.flush(30)

    t = threading.Thread(target=feed)
    read, first = 0, None
    t.start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            got = consume_ready(c, 1000, 0.05)
            read += len(got)
            if got and first is None:
                first = stats[-1] if stats else None
        last = stats[-1]
    finally:
        stop.set()
        t.join()
        c.close()

    def fetches(s: dict[str, object] | None) -> int:
        brokers = s["brokers"] if s else {}
        assert isinstance(brokers, dict)
        return sum(int(b["req"].get("Fetch", 0)) for b in brokers.values())

    return fetches(last) - fetches(first), read


def test_paced_fetches_hold_one_fetch_ahead(bootstrap: str) -> None:
    # A consumer with a fetch backoff: once caught up, one fetch per backoff, not one per
    # record batch (squall.kafka.paced_fetches, for a broker that charges each fetch).
    paced, read_paced = _fetches_while_reading(bootstrap, paced_fetches(100), 3.0)
    eager, read_eager = _fetches_while_reading(bootstrap, paced_fetches(0), 3.0)
    assert read_paced > 0 and read_eager > 0  # both kept reading what came
    # ~30 (3 s over 100 ms, each after its records were taken), with room for a loaded
    # machine's late statistics (46 seen); the eager consumer fetches each new batch.
    assert paced <= 60, paced
    assert eager >= 2 * paced, (eager, paced)
