from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.reliability.records import AckerBatch, AckerRecord, RecordKind
from squall.core.reliability.tuples import Anchoring, Tuple

F = ("word", "n")


def counter_ids() -> Anchoring:
    it = itertools.count(1)
    return Anchoring(lambda: 1 << (next(it) % 64))  # distinct bits make the XOR readable


def test_spout_emit_inits_with_the_xor_of_its_edges() -> None:
    a = counter_ids()
    e = a.spout_emit(spout_task=5, n_targets=3)
    edges = [anc[e.root] for anc in e.anchors]
    assert len(set(edges)) == 3
    assert e.init == AckerRecord(RecordKind.INIT, e.root, edges[0] ^ edges[1] ^ edges[2], 5)


def test_ack_record_is_own_edge_xor_children_edges() -> None:
    a = counter_ids()
    e = a.spout_emit(0, 1)
    t = Tuple(["hi", 1], F, e.anchors[0])
    kids = a.emit([t], n_targets=2)
    child_edges = [k[e.root] for k in kids]
    (rec,) = a.ack(t)
    assert rec == AckerRecord(RecordKind.ACK, e.root, e.anchors[0][e.root] ^ child_edges[0]
                              ^ child_edges[1])


def test_multi_anchored_child_belongs_to_every_root() -> None:
    a = counter_ids()
    x, y = a.spout_emit(0, 1), a.spout_emit(0, 1)
    tx = Tuple(["a", 1], F, x.anchors[0])
    ty = Tuple(["b", 2], F, y.anchors[0])
    (child,) = a.emit([tx, ty])
    assert set(child) == {x.root, y.root}
    recs = a.ack(tx) + a.ack(ty)
    assert {r.root for r in recs} == {x.root, y.root}


def test_unanchored_emit_and_untracked_tuples_send_nothing() -> None:
    a = counter_ids()
    assert a.emit([], 2) == [{}, {}]
    t = Tuple(["x", 0], F)
    assert not t.tracked
    assert a.ack(t) == []
    assert a.fail(t) == []


def test_second_ack_or_fail_sends_nothing() -> None:
    a = counter_ids()
    e = a.spout_emit(0, 1)
    t = Tuple(["x", 0], F, e.anchors[0])
    assert len(a.ack(t)) == 1
    assert a.ack(t) == []
    assert a.fail(t) == []
    assert a.reset_timeout(t) == []
    with pytest.raises(ValueError, match="already acked"):
        a.emit([t])


def test_fail_and_reset_name_every_root() -> None:
    a = counter_ids()
    x, y = a.spout_emit(0, 1), a.spout_emit(0, 1)
    (child,) = a.emit([Tuple(["a", 1], F, x.anchors[0]), Tuple(["b", 2], F, y.anchors[0])])
    t = Tuple(["c", 3], F, child)
    assert {r.root for r in a.reset_timeout(t)} == {x.root, y.root}
    assert {(r.kind, r.root) for r in a.fail(t)} == {(RecordKind.FAIL, x.root),
                                                     (RecordKind.FAIL, y.root)}


def test_field_access() -> None:
    t = Tuple(["hi", 3], F)
    assert t["word"] == "hi"
    assert t[1] == 3
    with pytest.raises(KeyError, match="no field 'nope'"):
        t["nope"]
    with pytest.raises(ValueError, match="2 values"):
        Tuple(["a", 1], ("one",))


def test_coalesce_xors_acks_per_root_and_keeps_the_rest() -> None:
    recs = [
        AckerRecord(RecordKind.INIT, 1, 9, 2),
        AckerRecord(RecordKind.ACK, 1, 3),
        AckerRecord(RecordKind.ACK, 2, 4),
        AckerRecord(RecordKind.ACK, 1, 5),
        AckerRecord(RecordKind.FAIL, 2),
        AckerRecord(RecordKind.FAIL, 2),
    ]
    assert AckerBatch.from_records(recs, 7).coalesced().to_records() == [
        AckerRecord(RecordKind.INIT, 1, 9, 2),
        AckerRecord(RecordKind.ACK, 1, 3 ^ 5),
        AckerRecord(RecordKind.ACK, 2, 4),
        AckerRecord(RecordKind.FAIL, 2),
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(RecordKind)), st.integers(1, 5),
                          st.integers(0, 2**64 - 1), st.integers(0, 3)), max_size=60))
def test_coalescing_keeps_each_roots_xor_and_outcomes(
        rows: list[tuple[RecordKind, int, int, int]]) -> None:
    """What the acker would conclude is unchanged: per root, the XOR of inits and acks, and
    whether a fail or a reset was sent; inits stay one per record."""
    recs = [AckerRecord(k, r, v if k <= RecordKind.ACK else 0, t if k is RecordKind.INIT else 0)
            for k, r, v, t in rows]
    out = AckerBatch.from_records(recs, 7).coalesced().to_records()

    def summary(rs: list[AckerRecord]) -> dict[int, tuple[int, bool, bool]]:
        s: dict[int, tuple[int, bool, bool]] = {}
        for rec in rs:
            x, f, z = s.get(rec.root, (0, False, False))
            s[rec.root] = (x ^ rec.value, f or rec.kind is RecordKind.FAIL,
                           z or rec.kind is RecordKind.RESET)
        return s

    assert summary(out) == summary(recs)
    assert sorted((r.root, r.value, r.task) for r in out if r.kind is RecordKind.INIT) == \
        sorted((r.root, r.value, r.task) for r in recs if r.kind is RecordKind.INIT)
    for kind in (RecordKind.ACK, RecordKind.FAIL, RecordKind.RESET):
        roots = [r.root for r in out if r.kind is kind]
        assert len(roots) == len(set(roots))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 2**64 - 1), st.integers(0, 9),
                          st.integers(0, 1000)), max_size=80))
def test_a_bolts_acks_coalesce_to_one_per_root_in_root_order(
        rows: list[tuple[int, int, int, int]]) -> None:
    """Acks only, as a bolt sends them (runs of one root next to each other, and the same
    root again further on): one record a root, in root order, its values XORed, the
    highest task, the earliest time."""
    n = len(rows)
    batch = AckerBatch(np.array([r for r, _, _, _ in rows], np.uint64),
                       np.array([v for _, v, _, _ in rows], np.uint64),
                       np.full(n, RecordKind.ACK, np.uint8),
                       np.array([t for _, _, t, _ in rows], np.uint16),
                       np.array([ts for _, _, _, ts in rows], np.int64))
    out = batch.coalesced()
    want: dict[int, tuple[int, int, int]] = {}
    for r, v, t, ts in rows:
        x, hi, lo = want.get(r, (0, 0, 1 << 62))
        want[r] = (x ^ v, max(hi, t), min(lo, ts))
    assert out.roots.tolist() == sorted(want)
    assert set(out.kinds.tolist()) <= {RecordKind.ACK}
    assert {r: (v, t, ts) for r, v, t, ts in zip(
        out.roots.tolist(), out.values.tolist(), out.tasks.tolist(), out.ts_ms.tolist(),
        strict=True)} == want


anchor_maps = st.dictionaries(st.integers(1, 2**64 - 2), st.integers(1, 2**64 - 2), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(anchor_maps, min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.booleans()), max_size=20))
def test_tuples_read_from_a_batch_keep_the_books_of_tuples_built_alone(
        anchors: list[dict[int, int]], emits: list[tuple[int, int, bool]]) -> None:
    """A batch's tuples take their anchors from its columns (one each, or a join's several)
    without a dict each; emitting from them and acking them gives the records that the same
    tuples built one by one give."""
    from squall.core.wire.tuple_batch import TupleBatch

    n = len(anchors)
    batch = TupleBatch.from_columns({"word": [f"w{i}" for i in range(n)]}, anchors)
    books = []
    for read in (True, False):
        a = Anchoring(itertools.count(1).__next__)
        ts = batch.tuples() if read else [Tuple([f"w{i}"], ("word",), anc)
                                          for i, anc in enumerate(anchors)]
        kids = [a.emit_one(ts[i % n]) if one else a.child_of([ts[i % n], ts[j % n]])
                for i, j, one in emits]
        roots: list[int] = []
        values: list[int] = []
        acked = [a.ack_into(t, roots, values) for t in ts]
        books.append((kids, acked, roots, values, [t.anchors for t in ts]))
    assert books[0] == books[1]
    assert books[0][4] == anchors
