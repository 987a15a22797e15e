"""Trident State: exact counts under replays (the applied records, the engine)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import StateError
from squall.core.reliability.lineage import child_path, unit
from squall.core.trident.aggregators import (
    CodedKeys,
    CombinerUpdates,
    Count,
    batch_updates,
)
from squall.core.trident.applied import AppliedSources, BatchRecord, TaskMark
from squall.core.trident.maps import (
    OpaqueMap,
    TransactionalMap,
)
from squall.core.trident.memory import MemoryBackingMap
from squall.core.trident.persist import BatchInput, PartitionPersist, PersistentAggregate
from squall.core.trident.values import TransactionalValue


@given(st.integers(0, 1 << 40), st.dictionaries(
    st.text(min_size=1, max_size=8),
    # sparse (runs) or many near each other, as a shuffled task's are (a bitmap)
    st.lists(st.integers(0, 1 << 40), max_size=30) | st.builds(
        lambda base, offs: [base + o for o in offs], st.integers(0, 1 << 40),
        st.lists(st.integers(0, 300), max_size=200)),
    max_size=4))
def test_batch_records_round_trip(txid: int, offsets: dict[str, list[int]]) -> None:
    rec = BatchRecord(txid, {s: np.unique(np.asarray(o, np.int64)) for s, o in offsets.items()
                             if o})
    back = BatchRecord.decode(rec.encode())
    assert back.txid == txid
    assert {s: o.tolist() for s, o in back.offsets.items()} == {
        s: o.tolist() for s, o in rec.offsets.items()}


@pytest.mark.parametrize("raw", [b"", b"{}", b'{"txid": 1, "runs": {"s": [1]}}', b"[1]",
                                 b'{"txid": 1, "runs": {}, "bits": {"s": [1, "%%"]}}',
                                 b'{"txid": 1, "runs": {}, "bits": {"s": ["1", "AA=="]}}',
                                 b'{"txid": 1, "runs": {}, "bits": {"s": [1]}}'])
def test_a_malformed_record_is_a_state_error(raw: bytes) -> None:
    with pytest.raises(StateError, match="malformed"):
        BatchRecord.decode(raw)


@given(st.integers(0, 1 << 40), st.dictionaries(st.text(min_size=1, max_size=8),
                                                st.integers(0, 1 << 40), max_size=4),
       st.integers(0, 1 << 40), st.dictionaries(st.text(min_size=1, max_size=8),
                                                st.integers(0, 1 << 40), max_size=4))
def test_task_marks_round_trip_and_each_raise_is_a_new_turn(
        txid: int, floors: dict[str, int], turn: int, committed: dict[str, int]) -> None:
    mark = TaskMark(txid, floors, turn)
    assert TaskMark.decode(mark.encode()) == mark
    up = mark.raised(txid, committed)  # even with the same txid (Spark's re-run)
    assert up.turn == turn + 1 and up != mark
    assert all(up.floors[s] >= o for s, o in {**floors, **committed}.items())


def test_a_task_mark_written_before_turns_reads_as_turn_0() -> None:
    assert TaskMark.decode(b'{"txid": 3, "floors": {"s:0": 7}}') == TaskMark(3, {"s:0": 7}, 0)
    with pytest.raises(StateError, match="malformed"):
        TaskMark.decode(b'{"txid": 3, "floors": {}, "turn": "x"}')


@given(st.permutations(list(range(40))), st.lists(st.integers(1, 8), min_size=1, max_size=10),
       st.lists(st.integers(0, 45), min_size=1, max_size=10))
def test_applied_sources_know_every_applied_message_whatever_the_order(
        order: list[int], sizes: list[int], probes: list[int]) -> None:
    """Batches apply messages in any order (replays come back below newer ones); asked
    between batches, the merged view (kept up to date, not rebuilt) knows each of them."""
    a, done, at = AppliedSources(), set(), 0
    for txid, n in enumerate(sizes, 1):
        offs = order[at:at + n]
        at += n
        a.applied(txid, {"s:0": np.asarray(offs, np.int64)})
        done |= set(offs)
        fresh = a.fresh("s:0", np.asarray(probes, np.int64)).tolist()
        assert fresh == [p not in done for p in probes]


def test_applied_sources_skip_earlier_batches_and_forget_on_rerun_and_commit() -> None:
    a = AppliedSources()
    a.applied(5, {"t:0": np.array([10, 11, 12])})
    assert a.fresh("t:0", np.array([11, 13])).tolist() == [False, True]
    assert a.fresh("t:1", np.array([11])).tolist() == [True]
    assert a.begin(5) == [5]  # batch 5 again: its own record does not count
    assert a.fresh("t:0", np.array([11])).tolist() == [True]
    a.applied(5, {"t:0": np.array([10, 11])})
    a.applied(6, {"t:0": np.array([20])})
    assert a.prune({"t:0": 12}) == [5]
    assert a.prune({}) == []
    with pytest.raises(StateError, match="recorded after batch 6"):
        a.applied(6, {"t:0": np.array([21])})


# ----- the property: any replays leave exact counts -------------------------------------

WORDS = ["the", "cow", "jumped", "over", "moon", "a", "b"]
N_TASKS = 2


def _task_of(word: str) -> int:
    return sum(map(ord, word)) % N_TASKS


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1,
             max_size=12),
    st.lists(st.tuples(st.sampled_from(["deliver", "lose", "crash", "spark_rerun", "replay",
                                        "dup"]),
                       st.integers(0, 1000)), max_size=40),
    st.sampled_from(["transactional", "opaque"]), st.sampled_from(["batch_id", "counter"]),
    st.booleans(), st.booleans())
def test_any_interleaving_of_replays_leaves_exact_counts(
        messages: list[list[str]], events: list[tuple[str, int]], kind: str, txids: str,
        coded: bool, two_hops: bool) -> None:
    """Messages (sentences) are split into words for two tasks. Events, in any order:
    deliver (a batch), lose (a message's tuples for one task never arrive: its tree fails),
    crash (a batch fails before its commit), spark_rerun (a committed batch is run again
    with the same txid and content: Spark's commit did not happen), replay (the spout emits
    a message again, under a new root), dup (an upstream micro-batch run again by Spark sends
    a message's tuples for a task again, in another record). In the end the spout replays
    what never completed, and every task drains: the counts equal the truth.

    txids "batch_id": the caller's (Spark's batch id, the same on a re-run); "counter": the
    task's own (a re-run gets a new one, as a fused aggregate's does), so only the applied
    records and the floors (the spout's committed offsets, given to some runs only, as a
    worker with an old view would) keep a re-run from counting twice.

    Each task runs in two workers (Spark's Python workers), the event choosing which: a
    worker knows the applied records only as long as no other ran the task since. The keys
    come as tuples or coded (as a columnar input gives them).

    ``two_hops``: a bolt between the split and the counting tasks executes each word on
    its own, so each word reaches its counting task in a record of its own, known by the
    path of the word tuple that emitted it (squall/core/reliability/lineage.py)."""
    store = [MemoryBackingMap[Any]() for _ in range(N_TASKS)]
    make = TransactionalMap if kind == "transactional" else OpaqueMap
    workers = [[PersistentAggregate(make(s), s, Count()) for _ in range(2)] for s in store]
    worker = [0]
    # Queued tuples: (source offset, the edge record they arrive in, word, unit).
    queues: list[list[tuple[int, int, str, str]]] = [[] for _ in range(N_TASKS)]
    txid = [0] * N_TASKS
    last: list[list[tuple[int, int, str, str]] | None] = [None] * N_TASKS
    records = iter(range(1, 1 << 30))
    sent: list[tuple[int, int]] = []  # (task, offset) of every record sent

    def tuples(off: int, t: int) -> list[tuple[int, int, str, str]]:
        """A message's tuples for task ``t``, in their records."""
        mine = [(k, w) for k, w in enumerate(messages[off]) if _task_of(w) == t]
        if not two_hops:
            rec = next(records)
            return [(off, rec, w, "src:0") for _, w in mine]
        return [(off, next(records), w, unit("src:0", child_path(0, k))) for k, w in mine]

    def emit(off: int) -> None:
        for t in range(N_TASKS):
            got = tuples(off, t)
            queues[t] += got
            sent.extend((t, off) for _ in got[:1])

    def committed(running: list[tuple[int, int, str, str]]) -> int:
        """The spout's commit point: below the first message with a tuple still queued or
        in the batch being run."""
        pending = [q[0] for queue in [*queues, running] for q in queue]
        return min(pending) if pending else len(messages)

    def run(t: int, batch: list[tuple[int, int, str, str]], tx: int,
            rerun: bool = False) -> None:
        # A re-run's tuples were applied and acked by its first run: they may be committed.
        seen = {"src:0": committed([] if rerun else batch)} \
            if txids == "counter" and tx % 2 else None
        workers[t][worker[0]].run(
            tx if txids == "batch_id" else None,
            BatchInput(_keys([w for _, _, w, _ in batch], coded),
                       [(w,) for _, _, w, _ in batch], [u for *_, u in batch],
                       np.array([o for o, *_ in batch], np.int64),
                       np.array([r for _, r, *_ in batch], np.int64)), seen)

    for off in range(len(messages)):
        emit(off)
    for ev, n in events:
        t = n % N_TASKS
        worker[0] = n // N_TASKS % 2
        if ev == "deliver" and queues[t]:
            take = 1 + n % len(queues[t])
            # A message's tuples for a task arrive together (one edge record).
            cut = take
            while cut < len(queues[t]) and queues[t][cut][:2] == queues[t][cut - 1][:2]:
                cut += 1
            batch, queues[t] = queues[t][:cut], queues[t][cut:]
            txid[t] += 1
            run(t, batch, txid[t])
            last[t] = batch
        elif ev == "crash" and queues[t]:
            put = store[t].put_applied

            def failing(rec: BatchRecord, put: Any = put) -> None:
                put(rec)
                raise RuntimeError("crash before commit")

            store[t].put_applied = failing  # type: ignore[method-assign]
            try:
                with pytest.raises(RuntimeError):
                    run(t, queues[t][:1], txid[t] + 1)
            finally:
                store[t].put_applied = put  # type: ignore[method-assign]
        elif ev == "spark_rerun" and last[t] is not None:
            run(t, last[t] or [], txid[t], rerun=True)
        elif ev == "replay":
            emit(n % len(messages))
        elif ev == "dup" and sent:
            tt, off = sent[n % len(sent)]
            queues[tt] += tuples(off, tt)
        elif ev == "lose":
            off = n % len(messages)
            # Its tuples still queued for one task vanish; the tree fails, the spout replays.
            queues[t] = [q for q in queues[t] if q[0] != off]
            emit(off)
    for t in range(N_TASKS):  # drain
        while queues[t]:
            batch, queues[t] = queues[t], []
            txid[t] += 1
            run(t, batch, txid[t])
    truth = Counter(w for m in messages for w in m)
    got: dict[str, int] = {}
    for s in store:
        for (w,), v in s.committed.items():
            got[w] = v.val if kind == "transactional" else v.curr
    assert got == dict(truth)


def _coded(words: list[str]) -> CodedKeys:
    uniq = list(dict.fromkeys(words))
    return CodedKeys(np.array([uniq.index(w) for w in words], np.int64), [(w,) for w in uniq])


def _keys(words: list[str], coded: bool) -> Sequence[tuple[Any, ...]]:
    return _coded(words) if coded else [(w,) for w in words]


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=30), st.data())
def test_coded_keys_count_as_their_tuples_do(words: list[str], data: st.DataObject) -> None:
    """Counted from codes or from tuples, a batch gives the same keys in the same order (first
    seen) with the same counts, whole or a subset of it."""
    keep = np.array(sorted(data.draw(st.sets(st.integers(0, max(0, len(words) - 1))))),
                    np.int64) if words else np.zeros(0, np.int64)
    for coded, plain in ((_coded(words), [(w,) for w in words]),
                         (_coded(words).take(keep), [(words[i],) for i in keep.tolist()])):
        assert list(coded) == plain
        cu, cn = batch_updates(coded, [()] * len(plain), Count())
        pu, pn = batch_updates(plain, [()] * len(plain), Count())
        assert isinstance(cn, CombinerUpdates) and isinstance(pn, CombinerUpdates)
        assert cu == pu and cn.apply([None] * len(cu)) == pn.apply([None] * len(pu))


def test_tuples_of_unknown_source_are_guarded_by_the_txid_alone() -> None:
    db: MemoryBackingMap[Any] = MemoryBackingMap()
    agg = PersistentAggregate(TransactionalMap(db), db, Count())

    def batch(n: int) -> BatchInput:
        return BatchInput([("k",)] * n, [()] * n, [""] * n, np.full(n, -1, np.int64),
                          np.arange(n, dtype=np.int64))

    agg.run(1, batch(2))
    agg.run(2, batch(3))  # not mistaken for messages batch 1 applied
    agg.run(2, batch(3))  # Spark's re-run: the txid skips it
    assert db.committed[("k",)] == TransactionalValue(2, 5)
    assert db.load_applied() == [] or all(not r.offsets for r in db.load_applied())


def test_a_message_that_arrives_twice_in_one_batch_counts_once() -> None:
    """An upstream micro-batch that Spark ran again sends the same emission in a second
    record: same source message, maybe even the same roots. The first record counts."""
    db: MemoryBackingMap[Any] = MemoryBackingMap()
    agg = PersistentAggregate(OpaqueMap(db), db, Count())
    words = ["the", "cow", "the"]  # message 4 of src:0, twice the word "the"
    n = len(words)
    agg.run(1, BatchInput([(w,) for w in words * 2], [()] * 2 * n, ["src:0"] * 2 * n,
                          np.full(2 * n, 4, np.int64), np.repeat([0, 1], n).astype(np.int64)))
    assert {k: v.curr for k, v in db.committed.items()} == {("the",): 2, ("cow",): 1}


def test_a_replay_in_the_same_record_as_its_first_emission_counts_once() -> None:
    """A batch bolt sends one record per task for its whole micro-batch: a message replayed
    while its first emission was still queued arrives in that record, under another root."""
    db: MemoryBackingMap[Any] = MemoryBackingMap()
    agg = PersistentAggregate(OpaqueMap(db), db, Count())
    words = ["the", "cow", "the"]  # message 4 of src:0, emitted under root 11, then 12
    n = len(words)
    agg.run(1, BatchInput([(w,) for w in words * 2], [()] * 2 * n, ["src:0"] * 2 * n,
                          np.full(2 * n, 4, np.int64), np.zeros(2 * n, np.int64),
                          np.repeat(np.array([11, 12], np.uint64), n)))
    assert {k: v.curr for k, v in db.committed.items()} == {("the",): 2, ("cow",): 1}


def test_a_worker_reads_the_records_again_once_another_ran_the_task() -> None:
    """A worker keeps the applied records its last batch left while the stored mark is the
    one it wrote. Another worker's run of the same txid (with other tuples) writes a mark of
    a new turn: the first worker then reads the records, and skips what the other applied."""
    db: MemoryBackingMap[Any] = MemoryBackingMap()
    a, b = (PersistentAggregate(OpaqueMap(db), db, Count()) for _ in range(2))

    def words(offsets: list[int]) -> BatchInput:
        return BatchInput([("w",)] * len(offsets), [()] * len(offsets),
                          ["src:0"] * len(offsets), np.array(offsets, np.int64),
                          np.zeros(len(offsets), np.int64))

    a.run(5, words([0]))
    b.run(5, words([0, 1]))  # the same txid: its mark's txid and floors are a's
    assert db.load_task().turn == 2
    a.run(6, words([1, 2]))  # message 1 was applied by b
    assert db.committed[("w",)].curr == 3


class _Tally:
    """A StateUpdater: counts each tuple's key, emits (key, count)."""

    def update_state(self, state: Any, tuples: Any, collector: Any) -> None:
        keys = sorted({(t[0],) for t in tuples})
        n = Counter(t[0] for t in tuples)
        news = state.multi_update(keys, [lambda c, k=k: (c or 0) + n[k[0]] for k in keys])
        for (k,), v in zip(keys, news, strict=True):
            collector.emit((k, v))


@pytest.mark.parametrize("make", [TransactionalMap, OpaqueMap])
def test_partition_persist_gets_only_the_fresh_tuples(make: Any) -> None:
    db: MemoryBackingMap[Any] = MemoryBackingMap()
    task = PartitionPersist(make(db), db, _Tally())

    def batch(words: list[str], offsets: list[int], record: int = 0) -> BatchInput:
        n = len(words)
        return BatchInput([(w,) for w in words], [(w,) for w in words], ["s:0"] * n,
                          np.array(offsets, np.int64), np.full(n, record, np.int64))

    assert task.run(1, batch(["a", "b", "a"], [0, 1, 2])).rows == [("a", 2), ("b", 1)]
    # Messages 1 and 2 replayed (Storm) with a new message 3: only 3 reaches the updater.
    out = task.run(2, batch(["b", "a", "c"], [1, 2, 3], record=1))
    assert (out.rows, out.skipped) == ([("c", 1)], 2)
    again = task.run(2, batch(["b", "a", "c"], [1, 2, 3], record=1))  # Spark's re-run
    assert again.rows == [("c", 1)]
    assert make(db).multi_get([("a",), ("b",), ("c",)]) == [2, 1, 1]
