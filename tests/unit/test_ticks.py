"""Tick tuples: the schedule, the configuration, chains, and what the executor does with
one (a rich bolt gets it in execute, untracked; a batch bolt never sees it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.ticks import CountsPerTick, topology
from examples.wordcount import SplitSentenceBatch
from squall.bolt import Bolt
from squall.core.errors import TopologyError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.chains import chains
from squall.core.topology.grouping import Edge, Grouping
from squall.core.topology.model import TopologySpec
from squall.core.topology.ticks import TICK_FREQ, TickSchedule, tick_routes
from squall.core.wire.tuple_batch import decode_tuples, encode_tuples, tick_batch
from squall.tuples import Tuple
from tests.unit.test_executor import SPLIT_TO_COUNT, Harness, ctx, make_executor, through

OUT = Edge("log", "t", 1, Grouping.GLOBAL)


@given(st.dictionaries(st.sampled_from("abc"), st.sampled_from([1.0, 1.5, 2.0, 7.0]),
                       min_size=1),
       st.lists(st.integers(1, 3000), min_size=1, max_size=80))
def test_ticks_keep_their_rate_and_never_outnumber_the_intervals(
        freq: dict[str, float], steps: list[int]) -> None:
    """Storm's timer: a tick per interval from the start, at the first look once it is due;
    never more ticks than intervals have passed, and one due is never missed."""
    s = TickSchedule(freq)
    now, ticks = 0, {b: 0 for b in freq}
    s.due(now)  # the first look: each bolt's first tick is an interval on
    for step in steps:
        now += step
        for b in s.due(now):
            ticks[b] += 1
        for b, f in freq.items():
            assert ticks[b] <= now // round(f * 1000)
    assert set(s.due(now + round(max(freq.values()) * 1000))) == set(freq)


def test_a_driver_held_up_sends_one_tick_not_the_missed_ones() -> None:
    s = TickSchedule({"count": 1.0})
    s.due(0)
    assert s.due(10_000) == ["count"]
    assert s.due(10_001) == []
    assert s.due(11_000) == ["count"]


@pytest.mark.parametrize("value", [0, 0.5, -1, "5", True, float("nan"), 100_000])
def test_a_bad_tick_frequency_is_refused_naming_it(value: Any) -> None:
    b = TopologyBuilder()
    b.set_spout("s", "t")
    b.set_bolt("count", "m:C", 1, outputs={"default": ["x"]}, config={TICK_FREQ: value}
               ).shuffle_grouping("s")
    with pytest.raises(TopologyError, match=f"bolt 'count': {TICK_FREQ} must be a number"):
        b.build("g")


def test_an_aggregate_takes_no_ticks() -> None:
    b = TopologyBuilder()
    b.set_spout("s", "t")
    raw = b.persistent_aggregate("count", ["str"], "count", 1).fields_grouping("s", ["str"])
    with pytest.raises(TopologyError, match="Trident bolt's configuration"):
        raw.add_configuration(TICK_FREQ, 1)
    spec = topology().to_dict()
    spec["bolts"].append({"name": "agg", "persistent_aggregate": {"group_by": ["word"]},
                          "config": {TICK_FREQ: 1},
                          "inputs": [{"component": "split", "grouping": "fields",
                                      "fields": ["word"]}]})
    with pytest.raises(TopologyError, match="persistent_aggregate takes no"):
        TopologySpec.from_dict(spec)


def test_a_ticked_bolt_fuses_into_its_upstreams_query() -> None:
    spec = topology()
    assert spec.component("count").tick_s == 1.0  # type: ignore[union-attr]
    assert chains(spec, ["split", "count", "log"]) == [("split", "count", "log")]


@given(st.integers(1, 12), st.integers(1, 12))
def test_every_task_of_a_ticked_bolt_gets_each_tick_from_one_head_task(
        head: int, tasks: int) -> None:
    routes = tick_routes(head, tasks)
    got = sorted(t for share in routes.values() for t in share)
    assert got == list(range(tasks))  # each task once
    assert set(routes) <= set(range(head)) and all(routes.values())  # real heads, each used
    if head == tasks:  # a head's own ticks: each task its own
        assert routes == {t: [t] for t in range(tasks)}


def test_tick_routes_refuse_a_side_without_tasks() -> None:
    with pytest.raises(TopologyError, match="0 head tasks"):
        tick_routes(0, 2)


@pytest.mark.parametrize("to", ["", "count"])
def test_a_tick_crosses_the_wire_as_storm_s(to: str) -> None:
    b = decode_tuples(encode_tuples(tick_batch(2.5, to)))
    assert b.to == to
    (t,) = b.tuples()
    assert t.is_tick and (t.stream, t.source, t.source_task, t["freq_secs"]) == (
        "__tick", "__system", -1, 2.5)
    assert not t.tracked


def test_a_tick_reaches_execute_and_what_it_emits_is_untracked() -> None:
    h = Harness()
    ex = make_executor(CountsPerTick(), ctx("count"), [OUT], ids=h.ids)
    split = make_executor(SplitSentenceBatch(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    _, sent = h.spout(["a b a"])
    words = [o for _, _, o in split.run(through([sent])).outputs]
    first = ex.run(through(words))
    assert first.outputs == [] and first.acked == 3
    ticked = ex.run(through([tick_batch(1.0)]))
    got = sorted((t["word"], t["count"], t.tracked) for _, _, b in ticked.outputs
                 for t in b.tuples())
    assert got == [("a", 2, False), ("b", 1, False)]
    assert ticked.acks.roots.size == 0  # nothing to tell the ackers
    assert ex.run(through([tick_batch(1.0)])).outputs == []  # counted since the last tick


class Seen(Bolt):
    outputs: ClassVar = {"default": ("x",)}

    def execute(self, t: Tuple) -> None:
        self.collector.emit((t.is_tick,), t)
        self.collector.ack(t)


def test_a_batch_bolt_never_sees_a_tick() -> None:
    h = Harness()
    ex = make_executor(SplitSentenceBatch(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    _, sent = h.spout(["x y"])
    out = ex.run(through([tick_batch(1.0), sent]))
    assert sorted(t["word"] for _, _, b in out.outputs for t in b.tuples()) == ["x", "y"]
    assert ex.run(through([tick_batch(1.0)])).outputs == []
    seen = make_executor(Seen(), ctx("seen"), [OUT], ids=h.ids)
    res = seen.run(through([tick_batch(1.0), sent]))
    flags: Sequence[bool] = [t["x"] for _, _, b in res.outputs for t in b.tuples()]
    assert sorted(flags) == [False, True]
