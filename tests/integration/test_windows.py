"""Windowed bolts on the real stack: page views counted in event-time windows
(examples/windows.py) through Kafka and Spark: every closed window's counts equal the
truth, clicks that come after their window closed go to the late stream, and the trees
complete as their windows are done with them."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from examples.windows import topology
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
T0 = 1_764_316_800_000
PAGES = [f"/p{i}" for i in range(5)]


class Edge:
    """Reads every partition of an edge topic from the start, decoding its tuples."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.tuples: list[tuple[str, tuple[object, ...], bool]] = []

    def read(self) -> list[tuple[str, tuple[object, ...], bool]]:
        for m in self.consumer.consume(500, 0.2):
            if not m.error():
                self.tuples += [(t.stream, t.values, t.tracked)
                                for t in decode_tuples(m.value() or b"").tuples()]
        return self.tuples


def user_stats(url: str, topology: str) -> dict[str, float]:
    """The windowed bolt's own statistics as the API sums them from a real scrape."""
    from services.api.stats import aggregate, scrape
    from squall.endpoint_fetch import Endpoints

    samples = scrape({url: "127.0.0.1"}, Endpoints(5))[url].samples or []
    got = aggregate(samples, topology).get("views")
    return {k: v for k, v in (got.counters if got else {}).items() if k.startswith("user_")}


def clicks(items: list[tuple[str, int]]) -> list[bytes]:
    return [json.dumps({"page": p, "ts": ts}).encode() for p, ts in items]


def test_an_event_time_window_counts_exactly_and_sends_late_clicks_aside(
        bootstrap: str, tmp_path: Path) -> None:
    name = f"wn{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    spec = topology(name, source, window_ms=1000, lag_ms=5000)
    ensure_topics(clients(bootstrap), {source: PARTS})
    # in order within the lag: none of these is late, whatever order they come in
    first = [(PAGES[i % 5], T0 + (i * 37) % 3000) for i in range(300)]
    truth = Counter((p, (ts - T0) // 1000 * 1000 + T0) for p, ts in first)
    ahead = [(p, T0 + 20_000) for p in PAGES]  # moves every task's watermark past them
    late = [(p, T0 + 500) for p in PAGES]
    (into,) = spec.edges_from("clicks")
    out = {e.stream: e for e in spec.edges_from("views")}

    acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, ["views", "log"],
                                            f"sqlite://{tmp_path / 'state.db'}")
    inputs = Edge(bootstrap, into.topic, into.partitions)
    counts = Edge(bootstrap, out["default"].topic, 1)
    aside = Edge(bootstrap, out["late"].topic, 1)

    def counted() -> Counter[tuple[str, int]]:
        got: Counter[tuple[str, int]] = Counter()
        for _, (page, views, start, _end), _ in counts.read():
            got[(str(page), int(str(start)))] += int(str(views))
        return got

    def committed() -> int:
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{name}.clicks", source, PARTS))

    try:
        with acker.start(), bolts.start(), spout.start():
            wait_for_queries(bolts)
            # each phase reaches the windows' edge before the next is sent, so a task sees
            # the clicks in this order
            for phase, expect in ((first, 300), (ahead, 305), (late, 310)):
                produce_source(bootstrap, source, clicks(phase), PARTS)

                def arrived(n: int = expect) -> bool:
                    return len(inputs.read()) >= n

                wait_for(arrived, 120, f"{expect} clicks on the edge to the windows",
                         explain=lambda: bolts.log_tail(40))
                if phase is ahead:
                    wait_for(lambda: counted() == truth, 120, "every window counted",
                             explain=lambda: f"{counted()} != {truth}\n" + bolts.log_tail(40))
            wait_for(lambda: len(aside.read()) >= len(late), 120, "the late clicks aside",
                     explain=lambda: bolts.log_tail(40))
            # the clicks counted and the late ones complete; those ahead wait in a window
            wait_for(lambda: committed() >= 300, 120, "the counted clicks committed",
                     explain=lambda: f"committed {committed()}\n" + bolts.log_tail(40))
            assert counted() == truth
            assert sorted((str(v[0]), v[1]) for _, v, _ in aside.read()) == sorted(late)
            assert all(tracked for _, _, tracked in counts.read() + aside.read())
            # the bolt's own metrics, on the job's /metrics by task and summed as the API does
            emitted = len(counts.read())  # one count per page and window
            url = f"http://127.0.0.1:{bolts.metrics_port}/metrics"
            wait_for(lambda: user_stats(url, name).get("user_views_per_page_count") == emitted,
                     30, f"{emitted} observations in the bolt's own histogram",
                     explain=lambda: str(user_stats(url, name)))
            stats = user_stats(url, name)
            assert stats["user_views_per_page_sum"] == 300
            starts = len({start for _, (_, _, start, _), _ in counts.read()})
            # a window per task and start: each task fired one for the starts its pages had
            assert starts <= stats["user_windows_total"] <= PARTS * starts
            per_task = {k: v for k, v in bolts.metrics().items()
                        if k.startswith("squall_user_windows_total{component=views,")}
            assert sum(per_task.values()) == stats["user_windows_total"], per_task
            assert 1 <= stats["user_last_window"] <= 300
    finally:
        for e in (inputs, counts, aside):
            e.consumer.close()
    # window [T0 + 20 s, T0 + 21 s) stays open: those clicks hold their partitions' commits
    assert committed() == 300
