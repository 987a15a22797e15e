"""The acker task's pure logic: watermarks, bad payloads, seq rebasing, bounded applies."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.reliability.records import AckerBatch, AckerRecord, Outcome, RecordKind
from squall.core.tasks.acker_task import AckerTask, Message
from squall.core.wire.internal import encode_acker_batch, encode_fail_reasons, encode_progress


def msg(offset: int, *records: AckerRecord, ts: int = 0) -> Message:
    return Message(offset, encode_acker_batch(AckerBatch.from_records(records, ts), ts))


def init(root: int, val: int) -> AckerRecord:
    return AckerRecord(RecordKind.INIT, root, val, 1)


def ack(root: int, val: int) -> AckerRecord:
    return AckerRecord(RecordKind.ACK, root, val)


def test_watermark_is_the_first_offset_a_pending_tree_needs_even_within_one_poll() -> None:
    t = AckerTask(0, 30_000, start_offset=100, now_ms=0)
    assert t.watermark() == 100
    out = t.apply([msg(100, init(1, 5)), msg(101, init(2, 6)), msg(102, ack(1, 5))], now_ms=0)
    assert [r.root for r in out.results.results()] == [1]
    assert t.watermark() == 101  # tree 2 started at 101; tree 1 is done
    t.apply([msg(103, ack(2, 6))], 0)
    assert t.watermark() == 104  # nothing pending: resume after the last message
    assert t.next_offset == 104


def test_bad_payloads_are_reported_and_skipped() -> None:
    t = AckerTask(0, 30_000, 0, 0)
    out = t.apply([Message(0, b"junk"), Message(1, None), msg(2, init(9, 0))], 0)
    assert [b.offset for b in out.bad] == [0, 1]
    assert "shorter than the header" in out.bad[0].reason
    assert "empty message" in out.bad[1].reason
    assert [r.outcome for r in out.results.results()] == [Outcome.ACKED]
    assert out.kinds[RecordKind.INIT] == 1
    assert t.next_offset == 3


def test_event_time_follows_record_timestamps() -> None:
    t = AckerTask(0, 1_000, 0, now_ms=10_000)
    t.apply([msg(0, init(1, 5), ts=2_000)], now_ms=10_000)
    assert t.event_time_ms == 2_000
    assert t.expire(2_500).results() == []  # the record's time, not arrival, runs the timer
    assert [r.outcome for r in t.expire(3_300).results()] == [Outcome.TIMED_OUT]


def test_seqs_rebase_before_they_wrap() -> None:
    t = AckerTask(0, 0, start_offset=0, now_ms=0)
    t.apply([msg(5, init(1, 5))], 0)
    far = (1 << 31) + 10
    t.apply([msg(far, init(2, 6))], 0)
    assert t.watermark() == 5
    t.apply([msg(far + 1, ack(1, 5))], 0)
    assert t.watermark() == far


def mark(offset: int, watermark_ms: int, job: str = "bolts:") -> Message:
    return Message(offset, encode_progress(job, watermark_ms))


def test_gated_timeouts_wait_for_the_bolts_progress_not_the_wall_clock() -> None:
    t = AckerTask(0, 1_000, 0, now_ms=0, gated=True)
    t.apply([msg(0, init(1, 5), ts=100)], now_ms=100)
    # No bolts job has said how far it got (still starting): nothing times out, ever.
    assert t.expire(60_000).results() == []
    # The bolts have processed what was written before 900: the tree is only queued.
    out = t.apply([mark(1, 900)], now_ms=60_000)
    assert out.bad == [] and t.next_offset == 2
    assert t.expire(60_000).results() == []
    # Processed past emit + T and still not acked: a real timeout.
    t.apply([mark(2, 1_200)], now_ms=60_000)
    assert [r.outcome for r in t.expire(60_000).results()] == [Outcome.TIMED_OUT]


def test_the_slowest_bolts_job_holds_the_clock_and_marks_never_go_back() -> None:
    t = AckerTask(0, 1_000, 0, now_ms=0, gated=True)
    t.apply([mark(0, 5_000, "a"), mark(1, 3_000, "b"), mark(2, 2_000, "b")], 0)
    assert t.timeout_now(10_000) == 3_000
    assert t.timeout_now(2_500) == 2_500  # never ahead of the acker's own clock


def test_ungated_timeouts_run_on_the_acker_clock_as_in_storm() -> None:
    t = AckerTask(0, 1_000, 0, now_ms=0)
    t.apply([msg(0, init(1, 5), ts=100)], now_ms=100)
    assert [r.outcome for r in t.expire(1_500).results()] == [Outcome.TIMED_OUT]


def test_a_large_poll_reaches_the_ledger_a_bounded_number_of_records_at_a_time() -> None:
    t = AckerTask(0, 30_000, 0, 0, records_per_apply=4)
    sizes: list[int] = []
    apply = t.ledger.apply

    def spy(batch: AckerBatch, now_ms: int, seq: object = 0) -> object:
        sizes.append(len(batch))
        return apply(batch, now_ms, seq=seq)  # type: ignore[arg-type]

    t.ledger.apply = spy  # type: ignore[assignment,method-assign]
    inits = [msg(i, init(100 + i, 7), init(200 + i, 8), init(300 + i, 9)) for i in range(5)]
    t.apply(inits, 0)
    assert sizes == [6, 6, 3]  # whole messages, until the bound is reached
    assert t.watermark() == 0 and t.next_offset == 5


# A tree: its init (the XOR of its edges: random 64-bit ids, as the spout and bolts draw them)
# and one ack per edge, or a fail in place of the last.
_trees = st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=1, max_size=30)


@given(_trees, st.integers(0, 2**32), st.integers(1, 12), st.integers(1, 6))
@settings(max_examples=200, deadline=None)
def test_records_applied_in_bounded_parts_decide_as_one_batch_does(
        trees: list[tuple[int, bool]], seed: int, bound: int, per_msg: int) -> None:
    rnd = random.Random(seed)  # not Hypothesis's: its ids would be shrunk to collide
    records: list[AckerRecord] = []
    for root, (n_edges, fails) in enumerate(trees, start=1):
        edges = [rnd.getrandbits(64) for _ in range(n_edges)]
        x = 0
        for e in edges:
            x ^= e
        records.append(init(root, x))
        records += [ack(root, e) for e in edges[:-1]]
        records.append(AckerRecord(RecordKind.FAIL, root, 0) if fails else ack(root, edges[-1]))
    rnd.shuffle(records)
    msgs = [msg(i, *records[lo:lo + per_msg])
            for i, lo in enumerate(range(0, len(records), per_msg))]
    whole = AckerTask(0, 30_000, 0, 0, records_per_apply=1 << 30)
    parts = AckerTask(0, 30_000, 0, 0, records_per_apply=bound)
    a = whole.apply(msgs, 0).results.results()
    b = parts.apply(msgs, 0).results.results()
    assert sorted((r.root, r.outcome) for r in a) == sorted((r.root, r.outcome) for r in b)
    assert len(a) == len(trees)
    assert whole.watermark() == len(msgs)
    if not any(fails for _, fails in trees):
        assert parts.watermark() == len(msgs)
    # else: a failed tree's acks in a later part are orphans, held until they expire, as
    # with any poll that splits a tree's records


def test_fail_reasons_travel_with_the_failed_result_and_are_let_go_with_their_tree() -> None:
    t = AckerTask(0, 30_000, 0, 0)
    why = {1: "killed the bolt's Python process (SIGSEGV)", 2: "raised ValueError: x"}
    (reasons,) = encode_fail_reasons(why, 0)
    out = t.apply([msg(0, init(1, 5), init(2, 6)), Message(1, reasons),
                   msg(2, AckerRecord(RecordKind.FAIL, 1), ack(2, 6))], 0)
    assert out.bad == []  # a reasons message is not a bad record
    assert {r.root: r.outcome for r in out.results.results()} == {1: Outcome.FAILED,
                                                                   2: Outcome.ACKED}
    assert t.take_reasons(out.results) == {1: why[1]}  # an acked tree's reason is moot
    assert t.reasons == {}
