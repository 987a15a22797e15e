"""Windowed bolts: the windows each tuple lands in (against a brute-force model), when its
tree completes, late tuples, failures, state that follows the task between workers, and
the window's configuration validated at submit."""

from __future__ import annotations

import pickle
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.bolt import TupleWindow, WindowedBolt
from squall.core.bolt_api.bolt import BasicBolt
from squall.core.errors import TopologyError, UsageError
from squall.core.reliability.clock import ManualClock
from squall.core.reliability.records import AckerRecord, Outcome, RecordKind
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology import windows as w
from squall.core.topology.grouping import Edge, Grouping
from squall.core.topology.model import TopologySpec
from squall.core.wire.tuple_batch import TupleBatch
from squall.topology import Count, Duration, TopologyBuilder
from tests.unit.test_executor import Harness, ctx, through

FIELDS = ("id", "ts")
OUT = Edge("sink", "t", 1, Grouping.GLOBAL)
LATE = Edge("sink", "late", 1, Grouping.GLOBAL, stream="late")
SEEN: list[tuple[int | None, int | None, list[int], list[int], list[int]]] = []


class Record(WindowedBolt):
    """Records each window (ids of its tuples, new and expired) and emits its size,
    anchored to the window."""

    outputs: ClassVar[dict[str, tuple[str, ...]]] = {"default": ("n",), "late": ("id", "ts")}

    def execute(self, window: TupleWindow) -> None:
        SEEN.append((window.start_timestamp, window.end_timestamp,
                     [t["id"] for t in window.get()], [t["id"] for t in window.get_new()],
                     [t["id"] for t in window.get_expired()]))
        if self.conf.get("explode") in [t["id"] for t in window]:
            raise ValueError("boom")
        self.collector.emit([len(window)])


def executor(h: Harness, config: dict[str, Any], clock: ManualClock | None = None
             ) -> BoltExecutor:
    return BoltExecutor(Record(), ctx("win"), [OUT, LATE], config, ids=h.ids,
                        clock=clock or ManualClock(), inputs=["src/default"])


def send(h: Harness, items: list[tuple[int, int]]) -> tuple[list[int], list[TupleBatch]]:
    roots, tuples = [], []
    for i, ts in items:
        e = h.anch.spout_emit(0, 1)
        h.send([e.init])
        roots.append(e.root)
        tuples.append(Tuple([i, ts], FIELDS, e.anchors[0], source="src"))
    return roots, through([TupleBatch.from_tuples(tuples, FIELDS, source="src")])


def settle(h: Harness, res: Any) -> None:
    """The executor's acks, and every child acked downstream."""
    h.send(res.acks)
    for _, _, b in res.outputs:
        for t in b.tuples():
            h.send(Anchoring(h.ids).ack(t))


def model(items: list[list[tuple[int, int]]], length: int, slide: int, lag: int,
          by_count: bool) -> tuple[list[tuple[int, int, list[int]]], set[int]]:
    """The windows fired (start, end, ids) and the late ids, by brute force."""
    kept: list[tuple[int, int]] = []  # (position, id)
    late: set[int] = set()
    fired: list[tuple[int, int, list[int]]] = []
    mark: int | None = None
    frontier: int | None = None  # ends up to it are done
    added = 0
    for k, batch in enumerate(items):
        for i, ts in batch:
            if by_count:
                kept.append((added, i))
            elif mark is not None and ts < mark:
                late.add(i)
                continue
            else:
                kept.append((ts, i))
            added += 1
        if by_count:
            clock = added
        else:
            newest = max((ts for b in items[:k + 1] for _, ts in b), default=None)
            if newest is not None and (mark is None or newest - lag > mark):
                mark = newest - lag
            if mark is None:
                continue
            clock = mark
        if not kept:
            continue
        end = (min(p for p, _ in kept) // slide + 1) * slide if frontier is None else frontier
        while end <= clock:
            ids = [i for p, i in sorted(kept) if end - length <= p < end]
            if ids:
                fired.append((end - length, end, ids))
            end += slide
        frontier = (clock // slide + 1) * slide  # every end up to the clock is done
    return fired, late


@settings(max_examples=150, deadline=None)
@given(st.data(), st.booleans(), st.integers(1, 6), st.integers(1, 6), st.booleans())
def test_windows_hold_what_brute_force_says_and_each_tuple_is_acked_once_after_its_last(
        data: st.DataObject, by_count: bool, length: int, slide_div: int,
        hop: bool) -> None:
    """Random batches, count or event-time windows, tumbling or sliding, the task moving
    between two workers (its state pickled across): the windows equal the model's, each
    tuple's tree completes once its last window ran and its child was acked, and no sooner;
    late tuples go to the late stream and complete."""
    slide = max(1, length // slide_div)
    scale = 1 if by_count else 10
    length, slide = length * scale, slide * scale
    lag = 0 if by_count else data.draw(st.integers(0, 30), "lag")
    ts = st.integers(1000, 1100)
    batches = data.draw(st.lists(st.lists(ts, max_size=6), min_size=1, max_size=8), "batches")
    items = []
    n = 0
    for b in batches:
        items.append([(n + k, t) for k, t in enumerate(b)])
        n += len(b)
    config: dict[str, Any] = {w.LENGTH_COUNT if by_count else w.LENGTH_MS: length,
                              w.SLIDE_COUNT if by_count else w.SLIDE_MS: slide}
    if not by_count:
        config.update({w.TIMESTAMP_FIELD: "ts", w.LAG_MS: lag, w.LATE_STREAM: "late"})
    h = Harness()
    workers = [executor(h, config), executor(h, config)]
    SEEN.clear()
    roots: dict[int, int] = {}
    late_out: list[int] = []
    for k, batch in enumerate(items):
        ex = workers[k % 2 if hop else 0]
        got, tb = send(h, batch)
        roots.update({i: r for (i, _), r in zip(batch, got, strict=True)})
        res = ex.run(tb)
        assert not res.errors, res.errors
        late_out += [t["id"] for _, _, b in res.outputs for t in b.tuples() if b.stream == "late"]
        settle(h, res)
        other = workers[(k + 1) % 2]
        assert ex.state is not None and other.state is not None
        other.state.apply(pickle.loads(pickle.dumps(ex.state.changes())))  # TaskState's job
    want, late = model(items, length, slide, lag, by_count)
    assert [(s, e, ids) for s, e, ids, _, _ in SEEN] == \
        [((None, None) if by_count else (s, e)) + (ids,) for s, e, ids in want]
    assert set(late_out) == late
    # new: in no earlier window; expired: in the one before, not in this one
    seen_before: set[int] = set()
    for (_, _, ids, new, expired), (_, _, prev) in zip(SEEN, [(0, 0, []), *want],
                                                        strict=False):
        assert set(new) == set(ids) - seen_before
        assert set(expired) == set(prev) - set(ids)
        seen_before |= set(ids)
    # a tree is complete iff its tuple is late or no window that has not fired can hold it
    frontier = want[-1][1] if want else None
    for i, r in roots.items():
        pos = i if by_count else dict(p for b in items for p in b)[i]
        done = i in late or (frontier is not None and any(i in ids for _, _, ids in want)
                             and pos < frontier + slide - length)
        assert h.decided.get(r) == (Outcome.ACKED if done else None), (i, pos, frontier)


def test_an_exception_in_execute_fails_the_windows_tuples_which_leave_it() -> None:
    h = Harness()
    ex = executor(h, {w.LENGTH_COUNT: 4, w.SLIDE_COUNT: 2, "explode": 3})
    SEEN.clear()
    roots, tb = send(h, [(i, 0) for i in range(6)])
    res = ex.run(tb)
    settle(h, res)
    # windows [0,1], [0..3] raises: 0..3 fail; the next window holds 4, 5 only
    assert [ids for _, _, ids, _, _ in SEEN] == [[0, 1], [0, 1, 2, 3], [4, 5]]
    assert res.errors == ["ValueError: boom"]
    assert all(h.decided[roots[i]] is Outcome.FAILED for i in range(4))
    assert roots[4] not in h.decided and roots[5] not in h.decided
    assert "raised ValueError: boom" in res.reasons[roots[0]]


def test_a_timestamp_that_is_not_a_number_fails_its_tuple_saying_so() -> None:
    h = Harness()
    ex = executor(h, {w.LENGTH_MS: 10, w.TIMESTAMP_FIELD: "ts"})
    e = h.anch.spout_emit(0, 1)
    h.send([e.init])
    bad = TupleBatch.from_tuples([Tuple([1, "noon"], FIELDS, e.anchors[0], source="src")],
                                 FIELDS, source="src")
    res = ex.run(through([bad]))
    h.send(res.acks)
    assert h.decided[e.root] is Outcome.FAILED
    assert "timestamp field 'ts' is 'noon'" in res.errors[0]


def test_late_tuples_without_a_late_stream_are_acked_and_warned_about() -> None:
    h = Harness()
    ex = executor(h, {w.LENGTH_MS: 10, w.TIMESTAMP_FIELD: "ts"})
    settle(h, ex.run(send(h, [(0, 100), (1, 200)])[1]))
    roots, tb = send(h, [(2, 150)])
    res = ex.run(tb)
    settle(h, res)
    assert h.decided[roots[0]] is Outcome.ACKED
    assert not res.outputs
    assert "1 late tuples (timestamps below the watermark 200)" in res.warnings[0]


def test_a_processing_time_window_closes_on_the_clock_even_with_no_tuple() -> None:
    h = Harness()
    clock = ManualClock(1_000_000)
    ex = executor(h, {w.LENGTH_MS: 1000}, clock)
    SEEN.clear()
    roots, tb = send(h, [(0, 0), (1, 0)])
    settle(h, ex.run(tb))
    assert not SEEN and not h.decided
    clock.advance(1000)
    settle(h, ex.run([]))  # a tick's micro-batch: nothing but the clock
    assert SEEN == [(1_000_000, 1_001_000, [0, 1], [0, 1], [])]
    assert all(h.decided[r] is Outcome.ACKED for r in roots)


def test_the_trees_a_window_holds_have_their_timeouts_reset_while_they_wait() -> None:
    """A count window that waits for more input than comes: its tuples' trees would time
    out and their messages be replayed; a reset every third of the timeout keeps them."""
    h = Harness()
    clock = ManualClock()
    ex = BoltExecutor(Record(), ctx("win"), [OUT, LATE], {w.LENGTH_COUNT: 10}, ids=h.ids,
                      clock=clock, inputs=["src/default"], message_timeout_s=3)
    roots, tb = send(h, [(0, 0), (1, 0)])
    resets = []
    for _ in range(7):
        res = ex.run(tb)
        tb = []  # the ticks after the first batch
        resets.append(sorted(res.acks.roots[res.acks.kinds == RecordKind.RESET].tolist()))
        clock.advance(500)
    assert resets == [[], [], sorted(roots), [], sorted(roots), [], sorted(roots)]


def test_a_replayed_tuple_replaces_the_copy_the_window_kept() -> None:
    """Its tree failed (a timeout while the bolts were down, say) and the spout sent its
    message again: the window holds it once, the new copy, whose tree completes."""
    h = Harness()
    ex = executor(h, {w.LENGTH_COUNT: 3})
    SEEN.clear()

    def message(i: int, offset: int) -> tuple[int, TupleBatch]:
        e = h.anch.spout_emit(0, 1)
        h.send([e.init])
        t = Tuple([i, 0], FIELDS, e.anchors[0], source="src", origin=("t-0", offset))
        return e.root, through([TupleBatch.from_tuples([t], FIELDS, source="src")])[0]

    old, first = message(0, 10)
    settle(h, ex.run([first]))
    again, replay = message(0, 10)
    other, second = message(1, 11)
    h.send([AckerRecord(RecordKind.FAIL, old)])
    settle(h, ex.run([replay, second]))
    assert [ids for _, _, ids, _, _ in SEEN] == [[0, 1]]  # arrivals 1 and 2; 0 left
    assert h.decided == {old: Outcome.FAILED, again: Outcome.ACKED, other: Outcome.ACKED}


def test_a_windowed_bolt_may_not_ack_and_its_emits_anchor_to_the_window() -> None:
    class Acks(WindowedBolt):
        outputs: ClassVar[dict[str, tuple[str, ...]]] = {"default": ("n",)}

        def execute(self, window: TupleWindow) -> None:
            self.collector.ack(window.get()[0])

    h = Harness()
    ex = BoltExecutor(Acks(), ctx("win"), [OUT], {w.LENGTH_COUNT: 1}, ids=h.ids,
                      clock=ManualClock())
    roots, tb = send(h, [(0, 0)])
    res = ex.run(tb)
    h.send(res.acks)
    assert "acked by their window" in res.errors[0]
    assert h.decided[roots[0]] is Outcome.FAILED


def test_a_window_needs_a_windowed_bolt_and_a_windowed_bolt_a_window() -> None:
    h = Harness()
    with pytest.raises(TopologyError, match="windowed bolt without a window"):
        BoltExecutor(Record(), ctx("win"), [OUT, LATE], {}, ids=h.ids, clock=ManualClock())

    class Plain(BasicBolt):
        pass

    with pytest.raises(TopologyError, match="is not a WindowedBolt"):
        BoltExecutor(Plain(), ctx("b"), [], {w.LENGTH_COUNT: 3}, clock=ManualClock())


def spec(config: dict[str, Any], outputs: dict[str, list[str]] | None = None) -> TopologySpec:
    return TopologySpec.from_dict({
        "name": "w",
        "spouts": [{"name": "src", "topics": ["t"], "scheme": "json", "fields": ["id", "ts"]}],
        "bolts": [{"name": "win", "class": "m:C", "config": config,
                   "outputs": outputs or {"default": ["n"]},
                   "inputs": [{"component": "src"}]}]})


@pytest.mark.parametrize(("config", "error"), [
    ({w.SLIDE_MS: 5}, "needs exactly one length"),
    ({w.LENGTH_COUNT: 5, w.LENGTH_MS: 5}, "needs exactly one length"),
    ({w.LENGTH_COUNT: 0}, f"{w.LENGTH_COUNT} must be a whole number in \\[1, 1000000\\], got 0"),
    ({w.LENGTH_MS: 2.5}, f"{w.LENGTH_MS} must be a whole number"),
    ({w.LENGTH_MS: "10"}, "got '10'"),
    ({w.LENGTH_COUNT: 5, w.SLIDE_COUNT: 6}, f"{w.SLIDE_COUNT} must be a whole number in "
                                            r"\[1, 5\]"),
    ({w.LENGTH_COUNT: 5, w.SLIDE_MS: 6}, "both counts or both durations"),
    ({w.LENGTH_COUNT: 5, w.TIMESTAMP_FIELD: "ts"}, "needs a duration window"),
    ({w.LENGTH_MS: 5, w.LAG_MS: 5}, "is for event time"),
    ({w.LENGTH_MS: 5, w.TIMESTAMP_FIELD: ""}, "must name a field"),
    ({w.LENGTH_MS: 5, w.TIMESTAMP_FIELD: "when"}, "input src/default has no field 'when'"),
    ({w.LENGTH_MS: 5, w.TIMESTAMP_FIELD: "ts", w.LATE_STREAM: "late"},
     "late stream 'late' .* is not among its outputs"),
])
def test_a_bad_window_is_refused_at_submit_naming_the_key(config: dict[str, Any],
                                                          error: str) -> None:
    with pytest.raises(TopologyError, match=f"bolt 'win': .*{error}"):
        spec(config)


def test_the_late_stream_carries_only_fields_the_inputs_have() -> None:
    ok = {w.LENGTH_MS: 5, w.TIMESTAMP_FIELD: "ts", w.LATE_STREAM: "late"}
    spec(ok, outputs={"default": ["n"], "late": ["id", "ts"]})
    with pytest.raises(TopologyError, match=r"carries fields \['who'\] that input"):
        spec(ok, outputs={"default": ["n"], "late": ["id", "who"]})


def test_the_builder_writes_storms_keys_and_a_window_gets_ticks() -> None:
    b = TopologyBuilder()
    b.set_spout("src", "t", scheme="json", fields=["id", "ts"])
    b.set_bolt("win", Record).with_window(Duration.seconds(10), Duration.seconds(5)) \
        .with_timestamp_field("ts").with_lag(Duration(2000)).with_late_tuple_stream("late") \
        .shuffle_grouping("src")
    b.set_bolt("counts", Record).with_tumbling_window(Count(100)).shuffle_grouping("src")
    b.set_bolt("clock", Record).with_window(Duration.minutes(0.25)).shuffle_grouping("src")
    got = b.build("w")
    win, counts, clock = got.bolts
    assert win.window == w.WindowSpec(10_000, 5_000, False, "ts", 2000, "late")
    assert win.config == win.window.config() if win.window else False
    assert counts.window == w.WindowSpec(100, 100, True)
    assert (win.tick_s, counts.tick_s, clock.tick_s) == (w.TICK_S,) * 3
    with pytest.raises(TopologyError, match="both be Count or both Duration"):
        b.set_bolt("x", Record).with_window(Count(3), Duration(3))


def test_ack_is_refused_on_the_collector_of_a_windowed_bolt() -> None:
    from squall.core.bolt_api.windowed import WindowedOutputCollector

    with pytest.raises(UsageError, match="acked by their window"):
        WindowedOutputCollector(None).ack(Tuple([1, 2], FIELDS))


def test_the_example_builds_the_same_in_python_and_yaml() -> None:
    from pathlib import Path

    from examples.windows import topology

    yaml = Path(__file__).resolve().parents[2] / "examples" / "windows.yaml"
    assert TopologySpec.from_text(yaml.read_text()) == topology()
    (views, _) = topology().bolts
    assert views.window == w.WindowSpec(10_000, 10_000, False, "ts", 2000, "late")
