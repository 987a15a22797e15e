"""The lag's arithmetic and Storm's shape of it, and which components have a live process."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.api.views import live_processes
from squall.core.control.assignment import Kind, Worker
from squall.core.control.cluster import TopologyRecord, WorkerInfo
from squall.core.control.lag import PartitionLag, storm_lag
from squall.core.control.lifecycle import Lifecycle
from squall.core.topology.builder import TopologyBuilder

offsets = st.integers(0, 10**12)


@given(offsets, offsets, st.one_of(st.none(), st.integers(0, 10**13)), st.integers(0, 10**13))
def test_lag_is_never_negative_and_has_an_age_only_while_messages_wait(
        committed: int, end: int, oldest: int | None, now: int) -> None:
    lag = PartitionLag("s", "t", 0, committed, end, oldest)
    assert lag.messages == max(0, end - committed)
    age = lag.seconds(now)
    assert age >= 0
    if lag.messages == 0 or oldest is None:
        assert age == 0
    else:
        assert age == max(0, now - oldest) / 1000


def test_storm_lag_has_storms_shape_per_spout_topic_and_partition() -> None:
    lags = [PartitionLag("a", "t", 1, 5, 9, 1_000), PartitionLag("a", "t", 0, 3, 3, None),
            PartitionLag("gone", "t", 0, 0, 1, None)]
    out = storm_lag(["a", "b"], lags, now_ms=3_500)
    assert out == {
        "a": {"spoutId": "a", "spoutType": "KAFKA", "spoutLagResult": {"t": {
            "0": {"consumerCommittedOffset": 3, "logHeadOffset": 3, "lag": 0,
                  "lagSeconds": 0.0},
            "1": {"consumerCommittedOffset": 5, "logHeadOffset": 9, "lag": 4,
                  "lagSeconds": 2.5}}}},
        "b": {"spoutId": "b", "spoutType": "KAFKA", "spoutLagResult": {}}}


def test_a_component_counts_the_processes_that_run_it_live() -> None:
    b = TopologyBuilder()
    b.set_spout("src", ["s"])
    b.set_bolt("split", "examples.wordcount:SplitSentence", 1,
               outputs={"default": ["word"]}).shuffle_grouping("src")
    b.set_bolt("count", "examples.wordcount:WordCount", 1,
               outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    rec = TopologyRecord("wc", b.build("wc"), Lifecycle(), 0)

    def ep(url: str, kind: str, comp: str, **extra: object) -> dict[str, object]:
        return {"topology": "wc", "kind": kind, "component": comp, "url": url, **extra}

    workers = [
        WorkerInfo(Worker("w1", Kind.SPOUT, 4), "h", 1, 0, (
            ep("u1", "spout", "src"), ep("u2", "spout", "src", stopping=True),
            {**ep("u9", "spout", "src"), "topology": "other"})),
        WorkerInfo(Worker("w2", Kind.BOLTS, 4), "h", 2, 0, (
            ep("u3", "bolts", "split"), ep("u3", "bolts", "count"),
            ep("u4", "bolts", "count", crashLooping=True))),
    ]
    # The fused bolts process runs split and count: one process each; the stopping spout
    # process, the crash-looping one and another topology's do not count; no acker runs.
    assert live_processes(rec, workers) == {"src": 1, "split": 1, "count": 1, "__acker": 0}
