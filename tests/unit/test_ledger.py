"""The acker ledger: Storm's acking scenarios, out-of-order arrival, expiry (its properties:
test_ledger_properties.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import LedgerError
from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import (
    MAX_TASK,
    AckerBatch,
    AckerRecord,
    Outcome,
    RecordKind,
    Result,
)
from squall.core.reliability.tuples import Anchoring, Tuple

T = 30_000
F = ("x",)


def apply(ledger: Ledger, records: Sequence[AckerRecord], now: int = 0, ts: int | None = None,
          seq: int = 0) -> list[Result]:
    batch = AckerBatch.from_records(records, now if ts is None else ts)
    return ledger.apply(batch, now, seq).results()


class Topo:
    """A tiny in-memory topology: anchoring plus a ledger, one record at a time."""

    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.anch = Anchoring(lambda: rng.getrandbits(63) + 1)
        self.ledger = Ledger(T)
        self.results: list[Result] = []
        self.now = 0

    def send(self, records: Sequence[AckerRecord]) -> None:
        self.results += apply(self.ledger, records, self.now)

    def spout(self, n_targets: int, task: int = 3) -> tuple[int, list[Tuple]]:
        e = self.anch.spout_emit(task, n_targets)
        self.send([e.init])
        return e.root, [Tuple([i], F, a) for i, a in enumerate(e.anchors)]

    def emit(self, anchors: Sequence[Tuple], n: int = 1) -> list[Tuple]:
        return [Tuple([0], F, a) for a in self.anch.emit(anchors, n)]

    def ack(self, t: Tuple) -> None:
        self.send(self.anch.ack(t))

    def fail(self, t: Tuple) -> None:
        self.send(self.anch.fail(t))

    def outcome(self, root: int) -> Outcome | None:
        got = [r.outcome for r in self.results if r.root == root]
        assert len(got) <= 1, f"root decided twice: {got}"
        return got[0] if got else None


def test_acking() -> None:
    t = Topo()
    root, (s,) = t.spout(1)
    words = t.emit([s], 3)
    t.ack(s)
    assert t.outcome(root) is None
    for w in words[:-1]:
        t.ack(w)
    assert t.outcome(root) is None
    t.ack(words[-1])
    assert t.outcome(root) is Outcome.ACKED
    assert t.results[0].task == 3
    assert len(t.ledger) == 0


def test_ack_branching() -> None:
    t = Topo()
    root, (a, b) = t.spout(2)  # two subscribers: the tree branches at the spout
    t.ack(a)
    assert t.outcome(root) is None
    (c,) = t.emit([b])
    t.ack(b)
    assert t.outcome(root) is None
    t.ack(c)
    assert t.outcome(root) is Outcome.ACKED


def test_acking_self_anchor() -> None:
    t = Topo()
    root, (s,) = t.spout(1)
    (child,) = t.emit([s, s])  # anchored twice to the same input
    t.ack(s)
    t.ack(child)
    assert t.outcome(root) is Outcome.ACKED


def test_no_subscribers_completes_at_once() -> None:
    t = Topo()
    root, _ = t.spout(0)
    assert t.outcome(root) is Outcome.ACKED


def test_multi_anchoring_joins_two_trees() -> None:
    t = Topo()
    r1, (a,) = t.spout(1)
    r2, (b,) = t.spout(1)
    (joined,) = t.emit([a, b])
    assert set(joined.anchors) == {r1, r2}
    t.ack(a)
    t.ack(b)
    assert t.outcome(r1) is None
    assert t.outcome(r2) is None
    t.ack(joined)
    assert t.outcome(r1) is Outcome.ACKED
    assert t.outcome(r2) is Outcome.ACKED


def test_fail_anywhere_fails_the_tree_even_if_the_rest_acks() -> None:
    t = Topo()
    root, (s,) = t.spout(1)
    w1, w2 = t.emit([s], 2)
    t.ack(s)
    t.ack(w1)
    t.fail(w2)
    assert t.outcome(root) is Outcome.FAILED


def test_fail_wins_over_a_zero_value() -> None:
    # A replayed micro-batch can ack a tuple in one run and fail it in the next:
    # the value is back to 0, yet the tree failed. Storm reports ACKED here.
    led = Ledger(T)
    recs = [AckerRecord(RecordKind.INIT, 4, 77, 1), AckerRecord(RecordKind.ACK, 4, 77),
            AckerRecord(RecordKind.FAIL, 4)]
    (res,) = apply(led, recs)
    assert res.outcome is Outcome.FAILED


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2**63), st.integers(1, 2**64 - 2)), min_size=1,
                max_size=20, unique_by=lambda r: r[0]),
       st.lists(st.integers(0, 2**64 - 1), max_size=40), st.booleans())
def test_failing_every_root_decides_each_pending_tree_failed(
        trees: list[tuple[int, int]], acks: list[int], same_batch: bool) -> None:
    # A micro-batch re-run after a crash while producing: its acks, sent a second time,
    # leave the XOR anywhere (0 included); failing its roots settles every tree now.
    led = Ledger(T)
    apply(led, [AckerRecord(RecordKind.INIT, r, v, 2) for r, v in trees])
    roots = np.array([r for r, _ in trees], np.uint64)
    resent = [AckerRecord(RecordKind.ACK, trees[i % len(trees)][0], a)
              for i, a in enumerate(acks)]
    fails = AckerBatch.fails(roots, 0)
    assert fails.to_records() == [AckerRecord(RecordKind.FAIL, r) for r, _ in trees]
    if same_batch:
        got = apply(led, resent + fails.to_records())
    else:
        got = apply(led, resent)
        got += led.apply(fails, 0).results()
    value = dict(trees)
    for rec in resent:
        value[rec.root] ^= rec.value
    # Apart, a tree the resent acks happened to zero is acked first; together, fail wins.
    acked = set() if same_batch else {r for r, v in value.items() if v == 0}
    assert {(r.root, r.outcome) for r in got} == (
        {(r, Outcome.ACKED) for r in acked}
        | {(r, Outcome.FAILED) for r in value if r not in acked})
    assert all(led.get(r) is None for r in value if r not in acked)


def test_ack_before_init() -> None:
    led = Ledger(T)
    assert apply(led, [AckerRecord(RecordKind.ACK, 9, 5)]) == []
    assert len(led) == 1
    assert led.get(9) is not None
    assert led.get(9).task is None  # type: ignore[union-attr]
    (res,) = apply(led, [AckerRecord(RecordKind.INIT, 9, 5, task=4)], now=10)
    assert (res.root, res.task, res.outcome) == (9, 4, Outcome.ACKED)


def test_fail_before_init_waits_for_the_spout_task() -> None:
    led = Ledger(T)
    assert apply(led, [AckerRecord(RecordKind.FAIL, 9)]) == []
    (res,) = apply(led, [AckerRecord(RecordKind.INIT, 9, 1234, task=2)])
    assert (res.task, res.outcome) == (2, Outcome.FAILED)


def test_records_of_one_root_in_one_batch_coalesce() -> None:
    led = Ledger(T)
    recs = [AckerRecord(RecordKind.ACK, 1, 6), AckerRecord(RecordKind.INIT, 1, 3, 1),
            AckerRecord(RecordKind.ACK, 1, 5)]
    (res,) = apply(led, recs)
    assert res.outcome is Outcome.ACKED


def test_timeout() -> None:
    # Storm's testTimeout: a bolt acks every other tuple; the rest fail after the timeout.
    t = Topo()
    roots = []
    for i in range(10):
        root, (s,) = t.spout(1)
        roots.append(root)
        if i % 2 == 0:
            t.ack(s)
    assert sorted(r.root for r in t.results) == sorted(roots[0::2])
    assert t.ledger.expire(T - 1) .results() == []
    timed = t.ledger.expire(T + t.ledger.rotation_ms).results()
    assert sorted(r.root for r in timed) == sorted(roots[1::2])
    assert {r.outcome for r in timed} == {Outcome.TIMED_OUT}
    assert len(t.ledger) == 0


def test_timeout_fires_within_one_rotation_after_the_deadline() -> None:
    led = Ledger(1000, rotation_ms=250)
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 0)], now=0)
    fired_at = None
    for now in range(0, 3000, 10):
        if led.expire(now).results():
            fired_at = now
            break
    assert fired_at is not None
    assert 1000 <= fired_at <= 1250


def test_reset_timeout() -> None:
    led = Ledger(1000, rotation_ms=100)
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 2)], now=0)
    (res,) = apply(led, [AckerRecord(RecordKind.RESET, 1)], now=900)
    assert res.outcome is Outcome.RESET  # the spout is told, as Storm does
    assert led.expire(1500).results() == []
    assert len(led) == 1
    assert [r.outcome for r in led.expire(1900).results()] == [Outcome.TIMED_OUT]


def test_timeouts_run_from_record_timestamps_not_arrival() -> None:
    led = Ledger(1000, rotation_ms=100)
    # Re-read after a restart: an old record must not get a fresh timer.
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 2)], now=5000, ts=0)
    assert [r.outcome for r in led.expire(5000).results()] == [Outcome.TIMED_OUT]


def test_orphans_without_init_expire_silently() -> None:
    led = Ledger(1000, rotation_ms=100)
    apply(led, [AckerRecord(RecordKind.ACK, 1, 7)], now=0)
    assert led.expire(2000).results() == []
    assert led.orphans_expired == 1
    assert len(led) == 0


def test_no_timeout_when_disabled() -> None:
    led = Ledger(0)
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 2)], now=0)
    assert led.expire(10**12).results() == []


def test_complete_latency_is_measured_from_the_first_record() -> None:
    led = Ledger(T)
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 2)], now=1000)
    (res,) = apply(led, [AckerRecord(RecordKind.ACK, 1, 7)], now=1750)
    assert res.latency_ms == 750


def test_low_seq_is_the_oldest_batch_a_pending_tree_needs() -> None:
    led = Ledger(T)
    assert led.low_seq() is None
    apply(led, [AckerRecord(RecordKind.INIT, 1, 7, 2)], seq=10)
    apply(led, [AckerRecord(RecordKind.INIT, 2, 8, 2)], seq=11)
    apply(led, [AckerRecord(RecordKind.ACK, 1, 9)], seq=12)  # not new: keeps seq 10
    assert led.low_seq() == 10
    apply(led, [AckerRecord(RecordKind.ACK, 1, 9 ^ 7)], seq=13)
    assert led.low_seq() == 11


def test_per_record_seq_tags_each_tree_with_its_first_record() -> None:
    led = Ledger(T)
    recs = [AckerRecord(RecordKind.INIT, 1, 7, 2), AckerRecord(RecordKind.ACK, 2, 8),
            AckerRecord(RecordKind.INIT, 2, 3, 2), AckerRecord(RecordKind.INIT, 3, 9, 2)]
    led.apply(AckerBatch.from_records(recs, 0), 0, seq=np.array([40, 41, 42, 43], np.int64))
    assert [led.get(r).seq for r in (1, 2, 3)] == [40, 41, 43]  # type: ignore[union-attr]


def test_task_out_of_range_is_refused() -> None:
    led = Ledger(T)
    batch = AckerBatch(np.array([1], np.uint64), np.array([1], np.uint64),
                       np.array([RecordKind.INIT], np.uint8), np.array([MAX_TASK + 1], np.uint16),
                       np.zeros(1, np.int64))
    with pytest.raises(LedgerError, match="spout task above"):
        led.apply(batch, 0)


@pytest.mark.parametrize("bad", [{"timeout_ms": -1}, {"timeout_ms": 1 << 31},
                                 {"timeout_ms": 10, "rotation_ms": 0}])
def test_bad_ledger_settings(bad: dict[str, int]) -> None:
    with pytest.raises(LedgerError):
        Ledger(**bad)


def test_growth_and_churn_keep_every_entry() -> None:
    rng = np.random.default_rng(0)
    led = Ledger(T, initial_capacity=64)
    roots = rng.integers(1, 2**63, 50_000, dtype=np.uint64)
    vals = rng.integers(1, 2**63, 50_000, dtype=np.uint64)

    def batch(kind: RecordKind, sl: slice) -> AckerBatch:
        n = len(roots[sl])
        return AckerBatch(roots[sl], vals[sl], np.full(n, kind, np.uint8),
                          np.ones(n, np.uint16), np.zeros(n, np.int64))

    for i in range(0, 50_000, 5000):
        assert len(led.apply(batch(RecordKind.INIT, slice(i, i + 5000)), 0)) == 0
    assert len(led) == 50_000
    assert led.capacity >= 50_000 / 0.75
    # Delete every other one (tombstones), then insert again into the holes.
    done = led.apply(batch(RecordKind.ACK, slice(0, 50_000, 2)), 0)
    assert len(done) == 25_000
    assert len(led) == 25_000
    again = led.apply(batch(RecordKind.INIT, slice(0, 50_000, 2)), 0)
    assert len(again) == 0
    assert len(led) == 50_000
    assert sorted(led.roots().tolist()) == sorted(roots.tolist())
    for r, v in zip(roots[:50].tolist(), vals[:50].tolist(), strict=True):
        e = led.get(r)
        assert e is not None
        assert e.value == v
        assert e.task == 1
    finished = led.apply(batch(RecordKind.ACK, slice(0, 50_000)), 0)
    assert len(finished) == 50_000
    assert len(led) == 0
    # Shrinks back when mostly empty and new work comes.
    led.apply(batch(RecordKind.INIT, slice(0, 10)), 0)
    assert led.get(int(roots[3])) is not None
