"""The acker task's pure logic: watermarks, bad payloads, seq rebasing."""

from __future__ import annotations

from services.acker.task import AckerTask, Message
from squall.core.records import AckerBatch, AckerRecord, Outcome, RecordKind
from squall.core.wire import encode_acker_batch, encode_progress


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
