"""The edge reader on the real broker: exact ranges, read by the worker's long-lived consumer."""

from __future__ import annotations

import uuid

import pytest

from services.bolts import clients
from services.bolts.source import EdgeEnds, read_range
from squall.kafka import ensure_topics
from tests.integration.helpers import produce_source

pytestmark = pytest.mark.integration


def test_ranges_are_read_exactly_one_after_another(bootstrap: str) -> None:
    topic = f"edge-read-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {topic: 1}, 30)
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


def test_edge_ends_are_heard_after_each_poll_begins(bootstrap: str) -> None:
    """Each poll waits for a fresh answer from every partition that has new data (one fetch:
    the consumer holds one message, not a continuous read); an idle partition keeps its end."""
    topic = f"edge-ends-{uuid.uuid4().hex[:8]}"
    ensure_topics(bootstrap, {topic: 2}, 30)
    produce_source(bootstrap, topic, [b"x"] * 40, partitions=1)  # all to partition 0
    ends = EdgeEnds(bootstrap, [(topic, 0), (topic, 1)], wait_s=2.0)
    try:
        assert ends.poll() == {f"{topic}:0": 40}
        for more in (25, 1, 300):
            before = ends.poll()[f"{topic}:0"]
            produce_source(bootstrap, topic, [b"y"] * more, partitions=1)
            assert ends.poll() == {f"{topic}:0": before + more}
    finally:
        ends.close()
