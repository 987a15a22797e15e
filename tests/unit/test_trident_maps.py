"""Trident State's map kinds: the documented cases of each (Trident's own examples), the
cached and snapshottable maps, the aggregators."""

from __future__ import annotations

from typing import Any

import pytest

from squall.core.errors import StateError
from squall.core.trident.aggregators import (
    Count,
    Sum,
    batch_updates,
)
from squall.core.trident.cached import CachedMap
from squall.core.trident.maps import (
    NonTransactionalMap,
    OpaqueMap,
    SnapshottableMap,
    TransactionalMap,
)
from squall.core.trident.memory import MemoryBackingMap
from squall.core.trident.values import OpaqueValue, TransactionalValue


def _count(state: Any, txid: int, words: list[str]) -> list[Any]:
    keys, ups = batch_updates([(w,) for w in words], [(w,) for w in words], Count())
    state.begin_commit(txid)
    out = state.multi_update(keys, ups)
    state.commit(txid)
    return list(out)


def test_transactional_skips_a_key_whose_txid_is_the_batch_s() -> None:
    # Trident State's example: batch 3 holds ["man"], ["man"], ["dog"].
    db: MemoryBackingMap[TransactionalValue[int]] = MemoryBackingMap()
    db.committed = {("man",): TransactionalValue(1, 3), ("dog",): TransactionalValue(3, 4),
                    ("apple",): TransactionalValue(2, 10)}
    _count(TransactionalMap(db), 3, ["man", "man", "dog"])
    assert db.committed == {("man",): TransactionalValue(3, 5),
                            ("dog",): TransactionalValue(3, 4),
                            ("apple",): TransactionalValue(2, 10)}


@pytest.mark.parametrize(("txid", "want"), [(3, OpaqueValue(3, 6, 4)), (2, OpaqueValue(2, 3, 1))])
def test_opaque_applies_a_new_txid_and_recomputes_a_replayed_one(txid: int,
                                                                 want: OpaqueValue[int]) -> None:
    # Trident State's example: stored {value 4, prevValue 1, txid 2}, a partial count of 2.
    db: MemoryBackingMap[OpaqueValue[int]] = MemoryBackingMap()
    db.committed = {("k",): OpaqueValue(2, 4, 1)}
    _count(OpaqueMap(db), txid, ["k", "k"])
    assert db.committed[("k",)] == want


def test_opaque_refuses_a_batch_behind_the_state() -> None:
    db: MemoryBackingMap[OpaqueValue[int]] = MemoryBackingMap()
    db.committed = {("k",): OpaqueValue(5, 4, 1)}
    with pytest.raises(StateError, match="batch 4 is behind the state's batch 5"):
        _count(OpaqueMap(db), 4, ["k"])


def test_opaque_reads_as_of_before_the_batch_in_progress() -> None:
    db: MemoryBackingMap[OpaqueValue[int]] = MemoryBackingMap()
    db.committed = {("k",): OpaqueValue(2, 4, 1)}
    m = OpaqueMap(db)
    assert m.multi_get([("k",)]) == [4]
    m.begin_commit(2)
    assert m.multi_get([("k",)]) == [1]
    m.rollback(2)


def test_non_transactional_applies_a_replay_again() -> None:
    db: MemoryBackingMap[int] = MemoryBackingMap()
    m = NonTransactionalMap(db)
    _count(m, 1, ["a"])
    _count(m, 1, ["a"])
    assert db.committed == {("a",): 2}


def test_one_update_takes_each_key_once() -> None:
    m = TransactionalMap(MemoryBackingMap[TransactionalValue[int]]())
    m.begin_commit(1)
    with pytest.raises(StateError, match="appears twice"):
        m.multi_update([("a",), ("a",)], [lambda c: 1, lambda c: 1])


def test_updates_outside_a_batch_are_refused() -> None:
    with pytest.raises(StateError, match="begin_commit"):
        TransactionalMap(MemoryBackingMap[TransactionalValue[int]]()).multi_put([("a",)], [1])


def test_snapshottable_keeps_one_global_value() -> None:
    db: MemoryBackingMap[OpaqueValue[int]] = MemoryBackingMap()
    g = SnapshottableMap(OpaqueMap(db))
    for txid, n in ((1, 3), (2, 4), (2, 5)):  # batch 2 replayed with other content
        g.begin_commit(txid)
        g.update(lambda c, n=n: (c or 0) + n)  # type: ignore[misc]
        g.commit(txid)
    assert g.get() == 8


def test_cached_map_serves_hits_evicts_the_least_recent_and_forgets_on_rollback() -> None:
    db: MemoryBackingMap[int] = MemoryBackingMap()
    c = CachedMap(db, cache_size=2)
    c.begin_commit(1)
    c.multi_put([("a",), ("b",), ("c",)], [1, 2, 3])
    c.commit(1)
    assert c.multi_get([("b",), ("c",)]) == [2, 3] and (c.hits, c.misses) == (2, 0)
    assert c.multi_get([("a",)]) == [1] and c.misses == 1  # evicted, read from the store
    c.begin_commit(2)
    c.multi_put([("a",)], [100])
    c.rollback(2)
    assert c.multi_get([("a",)]) == [1]  # the rolled-back value is not served


def test_reducer_folds_a_key_s_tuples_in_order() -> None:
    class Concat:
        def init(self) -> str:
            return ""

        def reduce(self, curr: str, values: Any) -> str:
            return curr + str(values[0])

    keys, ups = batch_updates([("k",), ("j",), ("k",)], [("a",), ("x",), ("b",)], Concat())
    assert keys == [("k",), ("j",)]
    assert [u(">") for u in ups] == [">ab", ">x"]
    keys, sums = batch_updates([("k",), ("k",)], [(2,), (3,)], Sum())
    assert [u(None) for u in sums] == [5] and [u(10) for u in sums] == [15]
