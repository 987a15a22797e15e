"""The edge reader on the real broker: exact ranges, read by the worker's long-lived consumer."""

from __future__ import annotations

import functools
import threading
import time
import uuid

import pytest
from pyspark.sql.streaming.datasource import ReadMaxRows

from services.bolts import clients
from services.bolts.edges import read_range
from services.bolts.source import EdgeEnds, EdgeReader
from squall.kafka import ensure_topics
from tests.integration.helpers import clients as kafka_of
from tests.integration.helpers import produce_source, wait_for

pytestmark = pytest.mark.integration


def test_ranges_are_read_exactly_one_after_another(bootstrap: str) -> None:
    topic = f"edge-read-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_of(bootstrap), {topic: 1}, 30)
    produce_source(bootstrap, topic, [f"m{i}".encode() for i in range(300)], partitions=1)
    c = clients.edge_consumer(bootstrap)
    got = []
    for s, e in ((0, 1), (1, 120), (120, 300)):
        r = read_range(c, topic, 0, s, e)
        assert r.offsets == list(range(s, e)) and r.lost == 0
        got += r.values
    assert got == [f"m{i}".encode() for i in range(300)]
    # More data later, read from where the last range ended (a fresh fetch on the same consumer).
    produce_source(bootstrap, topic, [b"late"], partitions=1)
    assert read_range(c, topic, 0, 300, 301).values == [b"late"]


@pytest.mark.parametrize("hold", [True, False])
def test_edge_ends_follow_the_partitions(bootstrap: str, hold: bool) -> None:
    """The first poll waits until every partition was heard; later ones report each end as of
    the last fetch, so new data shows within a poll or two (holding one message per partition
    between polls, or reading on)."""
    topic = f"edge-ends-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_of(bootstrap), {topic: 2}, 30)
    produce_source(bootstrap, topic, [b"x"] * 40, partitions=1)  # all to partition 0
    ends = EdgeEnds(bootstrap, [(topic, 0), (topic, 1)], wait_s=2.0, hold=hold)
    try:
        assert ends.poll() == {f"{topic}:0": 40}
        for expected, more in ((65, 25), (66, 1), (366, 300)):
            produce_source(bootstrap, topic, [b"y"] * more, partitions=1)
            wait_for(functools.partial(_ends_are, ends, {f"{topic}:0": expected}), 30,
                     f"the end {expected} of partition 0")
    finally:
        ends.close()


def _ends_are(ends: EdgeEnds, want: dict[str, int]) -> bool:
    return ends.poll() == want


def test_an_offer_after_an_idle_spell_waits_for_the_whole_burst(bootstrap: str) -> None:
    """A burst produced in five pieces is offered as one micro-batch, not its front: the
    offer waits until the edges stood still (``quiet_ms``, long here: a loaded machine may
    pause the producer between pieces)."""
    topic = f"edge-linger-{uuid.uuid4().hex[:8]}"
    ensure_topics(kafka_of(bootstrap), {topic: 2}, 30)
    reader = EdgeReader({"bootstrap": bootstrap, "topics": topic, "tasks": "0,1",
                         "quiet_ms": "1500", "linger_ms": "60000"})
    limit = ReadMaxRows(10_000)
    start = reader.initialOffset()
    try:
        assert reader.latestOffset(start, limit) == start  # nothing yet: no batch, at once
        first = threading.Event()

        def burst() -> None:
            for _ in range(5):
                produce_source(bootstrap, topic, [b"x"] * 10, partitions=2)
                first.set()
                threading.Event().wait(0.05)

        feeder = threading.Thread(target=burst)
        feeder.start()
        assert first.wait(30)
        offer, deadline = start, time.monotonic() + 30
        while offer == start and time.monotonic() < deadline:  # as Spark's triggers do
            offer = reader.latestOffset(start, limit)
        feeder.join()
        assert offer == {f"{topic}:0": 25, f"{topic}:1": 25}
    finally:
        reader.stop()
