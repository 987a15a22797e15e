"""Storm's OffsetManagerTest scenarios, plus retries, dead letters and properties."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import OffsetError
from squall.core.reliability.offsets import GiveUp, OffsetManager, OffsetState, Retry
from squall.core.reliability.retry import RetrySchedule


def emit_and_ack(m: OffsetManager, *offsets: int) -> None:
    for o in offsets:
        m.emitted(o)
    for o in offsets:
        m.acked(o)


def test_skip_missing_offsets_when_finding_next_commit_offset_with_gap_in_middle_of_acked() -> None:
    m = OffsetManager(0)
    for o in (0, 1, 2, 5, 6):  # 3 and 4 compacted away
        m.emitted(o)
    for o in (0, 1, 2, 6):
        m.acked(o)
    assert m.next_commit_offset() == 5  # 5 still pending; 3-4 do not exist
    m.acked(5)
    assert m.next_commit_offset() == 7


def test_skip_missing_offsets_when_finding_next_commit_offset_with_gap_before_acked() -> None:
    m = OffsetManager(0)
    m.emitted(5)  # 0-4 compacted away
    m.emitted(6)
    m.acked(6)
    assert m.next_commit_offset() is None  # 5 is still pending
    m.acked(5)
    assert m.next_commit_offset() == 7


def test_offsets_the_reader_passed_without_a_record_are_committed_past() -> None:
    m = OffsetManager(0)
    emit_and_ack(m, 0, 1, 2)
    m.passed(4)  # 3: a transaction's commit marker, the partition's last offset
    assert m.next_commit_offset() == 4
    m.committed(4)
    m.passed(6)  # an aborted transaction's records and marker, read past: nothing new
    assert m.next_commit_offset() == 6
    m.emitted(6)
    m.passed(5)  # a position behind the end changes nothing
    assert m.next_commit_offset() is None  # 6 pending
    m.acked(6)
    assert m.next_commit_offset() == 7


def test_a_position_passed_while_an_offset_is_open_waits_for_it() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    m.emitted(1)
    m.acked(1)
    m.passed(3)
    assert m.next_commit_offset() is None
    m.acked(0)
    assert m.next_commit_offset() == 3


def test_find_next_committed_offset_with_no_acks() -> None:
    m = OffsetManager(0)
    assert m.next_commit_offset() is None
    m.emitted(0)
    assert m.next_commit_offset() is None


def test_find_next_commit_offset_with_one_ack() -> None:
    m = OffsetManager(0)
    emit_and_ack(m, 0)
    assert m.next_commit_offset() == 1  # last processed + 1, as commitSync wants


def test_find_next_commit_offset_with_multiple_out_of_order_acks() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    m.emitted(1)
    m.acked(1)
    assert m.next_commit_offset() is None
    m.acked(0)
    assert m.next_commit_offset() == 2


def test_find_next_commit_offset_with_acked_offset_gap() -> None:
    m = OffsetManager(0)
    for o in (0, 1, 2):
        m.emitted(o)
    m.acked(2)
    m.acked(0)
    assert m.next_commit_offset() == 1


def test_find_next_offset_with_acked_but_not_emitted_offset_gap() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    m.emitted(2)  # 1 never came from Kafka: compacted
    m.acked(2)
    m.acked(0)
    assert m.next_commit_offset() == 3


def test_find_next_commit_offset_with_unacked_offset_gap() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    m.emitted(1)
    m.acked(0)
    assert m.next_commit_offset() == 1


def test_find_next_commit_offset_when_too_low_offset_is_acked() -> None:
    m = OffsetManager(10)
    assert m.acked(0) is False
    assert m.next_commit_offset() is None
    with pytest.raises(OffsetError, match="below the committed offset 10"):
        m.emitted(3)


def test_commit() -> None:
    m = OffsetManager(0)
    emit_and_ack(m, 0, 1, 2)
    m.committed(2)
    assert m.committed_offset == 2
    assert m.num_uncommitted == 1
    assert m.next_commit_offset() == 3
    m.committed(3)
    assert m.num_uncommitted == 0
    assert m.next_commit_offset() is None


def test_commit_never_passes_an_unfinished_offset() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    m.emitted(1)
    m.acked(1)
    with pytest.raises(OffsetError, match="passes offset 0, which is not done"):
        m.committed(2)
    assert m.committed_offset == 0  # nothing applied by the refused commit


def test_commit_past_the_end_is_refused() -> None:
    m = OffsetManager(0)
    with pytest.raises(OffsetError, match="past the end"):
        m.committed(5)


def test_failed_offset_is_retried_by_the_backoff_schedule() -> None:
    m = OffsetManager(0, RetrySchedule(initial_delay_ms=100, multiplier=2, max_delay_ms=1000,
                                       max_retries=3))
    for o in (0, 1, 2):
        m.emitted(o)
    m.acked(0)
    m.acked(2)
    assert m.failed(1, now_ms=1000) == Retry(1, 1100, 1)
    assert m.state(1) is OffsetState.FAILED
    assert m.next_commit_offset() == 1  # a failed offset blocks the commit
    assert m.due_retries(1099) == []
    assert m.due_retries(1100) == [1]
    assert m.next_retry_ms() == 1100
    # Read again, only the due failed offset is emitted again.
    assert [o for o in (0, 1, 2) if m.should_emit(o, 1100)] == [1]
    assert m.should_emit(3, 1100)
    m.emitted(1)
    assert m.state(1) is OffsetState.PENDING
    assert m.due_retries(10_000) == []
    assert m.failed(1, 2000) == Retry(1, 2200, 2)
    m.emitted(1)
    assert m.failed(1, 3000) == Retry(1, 3400, 3)
    m.emitted(1)
    assert m.failed(1, 4000) == GiveUp(1, 4)
    assert m.state(1) is OffsetState.DEAD_LETTERING
    assert not m.should_emit(1, 10**9)
    assert m.next_commit_offset() == 1  # not done until the dead letter is confirmed
    assert m.acked(1)
    assert m.next_commit_offset() == 3


def test_stale_results_are_ignored() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    assert m.acked(0)
    assert m.acked(0) is False
    assert m.failed(0, 0) is None
    assert m.failed(99, 0) is None


def test_only_failed_offsets_are_reemitted() -> None:
    m = OffsetManager(0)
    m.emitted(0)
    with pytest.raises(OffsetError, match="offset 0 is pending"):
        m.emitted(0)
    m.acked(0)
    with pytest.raises(OffsetError, match="offset 0 is done"):
        m.emitted(0)


def test_max_uncommitted_offsets_caps_emission() -> None:
    m = OffsetManager(0, max_uncommitted=3)
    for o in range(3):
        assert not m.at_capacity()
        m.emitted(o)
    assert m.at_capacity()
    emit_done = [m.acked(o) for o in range(3)]
    assert all(emit_done)
    assert m.at_capacity()  # done but not yet committed still counts
    m.committed(m.next_commit_offset() or 0)
    assert not m.at_capacity()


def test_compaction_of_the_order_list_keeps_answers() -> None:
    m = OffsetManager(0)
    for o in range(5000):
        m.emitted(o)
        m.acked(o)
        if o % 700 == 0:
            nxt = m.next_commit_offset()
            assert nxt == o + 1
            m.committed(nxt)
    m.emitted(5000)
    assert m.next_commit_offset() == 5000
    m.committed(5000)
    assert m.num_uncommitted == 1


@st.composite
def partition_runs(draw: st.DrawFn) -> tuple[list[int], list[tuple[str, int]]]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    offsets = [i for i, g in enumerate(gaps) if not g] or [0]
    events = [(kind, o) for o in offsets for kind in draw(
        st.lists(st.sampled_from(["ack", "fail"]), min_size=1, max_size=3))]
    events = draw(st.permutations(events))
    return offsets, events


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.booleans()), max_size=30),
       st.data())
def test_commits_pass_recordless_offsets_and_never_an_open_one(
    runs: list[tuple[int, int, bool]], data: st.DataObject,
) -> None:
    """A partition read as runs of records, each followed by offsets holding none (markers,
    compaction) that the reader's position passes; acks come in any order. A commit never
    passes an open record, and once all are acked the commit is the reader's position."""
    m = OffsetManager(0)
    pos, records, open_ = 0, [], set()
    for n_records, n_empty, ack_some in runs:
        new = list(range(pos, pos + n_records))
        if new:
            m.emitted_new(new)
            records += new
            open_.update(new)
        pos += n_records + n_empty
        m.passed(pos)
        if ack_some and open_:
            for o in data.draw(st.lists(st.sampled_from(sorted(open_)), unique=True)):
                m.acked(o)
                open_.discard(o)
        nxt = m.next_commit_offset()
        if nxt is not None:
            assert not [o for o in open_ if o < nxt], f"commit {nxt} passes an open record"
            m.committed(nxt)
    for o in sorted(open_):
        m.acked(o)
    nxt = m.next_commit_offset()
    if nxt is not None:
        m.committed(nxt)
    assert m.committed_offset == pos


@settings(max_examples=300, deadline=None)
@given(partition_runs())
def test_never_commits_past_an_unfinished_offset_and_commits_all_once_done(
    run: tuple[list[int], list[tuple[str, int]]],
) -> None:
    offsets, events = run
    m = OffsetManager(0, RetrySchedule(initial_delay_ms=0, max_retries=None))
    for o in offsets:
        m.emitted(o)
    for now, (kind, o) in enumerate(events):
        if kind == "ack":
            m.acked(o)
        elif m.failed(o, now) is not None:
            m.emitted(o)  # the replay
        nxt = m.next_commit_offset()
        if nxt is not None:
            unfinished = [x for x in offsets if x < nxt and m.state(x) is not OffsetState.DONE]
            assert not unfinished, f"commit {nxt} would pass {unfinished}"
            if now % 2:
                m.committed(nxt)
    for o in offsets:
        if m.state(o) is OffsetState.FAILED:
            m.emitted(o)
        m.acked(o)
    final = m.next_commit_offset()
    if final is not None:
        m.committed(final)
    assert m.committed_offset == offsets[-1] + 1
    assert m.num_uncommitted == 0


def test_emitted_new_takes_many_offsets_at_once() -> None:
    m = OffsetManager(0)
    m.emitted_new([0, 1, 2, 4])
    assert m.fetched_end == 5
    assert m.num_pending == 4
    with pytest.raises(OffsetError, match="offset 3 is not new"):
        m.emitted_new([3])
    for o in (0, 1, 2, 4):
        m.acked(o)
    assert m.next_commit_offset() == 5


def test_acks_match_the_delivery_they_belong_to() -> None:
    m = OffsetManager(0, RetrySchedule(initial_delay_ms=0, max_retries=None))
    m.emitted_new([0, 1, 2], now_ms=100, payloads=["a", "b", "c"])
    assert m.in_flight == 3
    m.failed(1, 150)
    m.emitted(1, now_ms=160)  # delivery 1 (one failure before it)
    lat = m.settle_acks(np.array([0, 1, 1, 2, 2]), np.array([0, 0, 1, 1, 0]), now_ms=200)
    # offset 1's first delivery and offset 2's wrong attempt are stale; duplicates count once
    assert sorted(lat.tolist()) == [40, 100, 100]
    assert m.in_flight == 0 and m.num_pending == 0
    assert m.payload(0) is None  # let go once done
    assert m.next_commit_offset() == 3


def test_reset_restarts_the_clock_of_the_matching_delivery_only() -> None:
    m = OffsetManager(0)
    m.emitted_new([5, 6], now_ms=0)
    assert m.reset_timeouts(np.array([5, 6, 7]), np.array([0, 3, 0]), now_ms=50) == 1
    offs, attempts, stamps = m.in_flight_offsets()
    assert offs.tolist() == [5, 6] and attempts.tolist() == [0, 0]
    assert stamps.tolist() == [50, 0]
    assert m.oldest_in_flight_ms() == 0


def test_a_large_window_grows_and_compacts() -> None:
    m = OffsetManager(0)
    for lo in range(0, 100_000, 10_000):
        m.emitted_new(list(range(lo, lo + 10_000)), payloads=list(range(lo, lo + 10_000)))
        m.acked_many(np.arange(lo, lo + 10_000, 2))
    assert m.num_pending == 50_000 and m.payload(99_999) == 99_999
    assert m.acked_many(np.arange(1, 60_000, 2)) == 30_000
    m.committed(m.next_commit_offset() or 0)
    assert m.committed_offset == 60_001  # 60,000 is even: acked in its batch
    assert m.payload(60_001) == 60_001 and m.state(60_001) is OffsetState.PENDING
    assert m.num_uncommitted == 39_999


@st.composite
def operations(draw: st.DrawFn) -> list[tuple[str, int]]:
    ops = st.tuples(st.sampled_from(["new", "gap", "ack", "fail", "replay", "commit"]),
                    st.integers(0, 60))
    return draw(st.lists(ops, max_size=120))


@settings(max_examples=300, deadline=None)
@given(operations())
def test_the_packed_table_answers_as_a_plain_model_does(ops: list[tuple[str, int]]) -> None:
    """Against a dict of offset -> state: every query agrees after every step, and each
    offset's payload (a tuple: kept whole, not unpacked) is there until it is done."""
    m = OffsetManager(0, RetrySchedule(initial_delay_ms=0, max_retries=None))
    model: dict[int, str] = {}
    end = 0
    for kind, x in ops:
        if kind in ("new", "gap"):
            end += 1 + (x % 3 if kind == "gap" else 0)
            m.emitted(end - 1, payload=("p", end - 1))
            model[end - 1] = "pending"
            continue
        if not model:
            continue
        o = sorted(model)[x % len(model)]
        if kind == "ack":
            assert m.acked(o) == (model[o] == "pending")
            if model[o] == "pending":
                model[o] = "done"
        elif kind == "fail":
            assert (m.failed(o, 0) is not None) == (model[o] == "pending")
            if model[o] == "pending":
                model[o] = "failed"
        elif kind == "replay" and model[o] == "failed":
            m.emitted(o)
            model[o] = "pending"
        elif kind == "commit":
            nxt = m.next_commit_offset()
            window = sorted(model)  # emitted offsets >= the committed one
            i = next((j for j, k in enumerate(window) if model[k] != "done"), len(window))
            expect = None if i == 0 else (window[i] if i < len(window) else window[-1] + 1)
            assert nxt == expect
            if nxt is not None:
                m.committed(nxt)
                assert m.committed_offset == nxt
                model = {k: v for k, v in model.items() if k >= nxt}
        for k, v in model.items():
            assert m.state(k).value == v
            assert m.payload(k) == (None if v == "done" else ("p", k))
        assert m.num_pending == sum(v != "done" for v in model.values())
        assert m.in_flight == sum(v == "pending" for v in model.values())


def test_a_done_payload_is_let_go_even_after_the_window_moved() -> None:
    """Payloads moved by a compaction leave no reference behind in their old places."""

    class Message:
        pass

    m = OffsetManager(0)
    msgs = [Message() for _ in range(2_500)]
    refs = [weakref.ref(x) for x in msgs]
    m.emitted_new(list(range(2_000)), payloads=msgs[:2_000])
    m.acked_many(np.arange(1_900))
    m.committed(m.next_commit_offset() or 0)
    m.emitted_new(list(range(2_000, 2_500)), payloads=msgs[2_000:])  # compacts: 100 move
    assert m.payload(1_950) is msgs[1_950] and m.payload(2_400) is msgs[2_400]
    m.acked_many(np.arange(1_900, 2_500))
    del msgs
    gc.collect()
    assert [r for r in refs if r() is not None] == []
