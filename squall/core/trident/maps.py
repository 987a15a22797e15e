"""Trident's map kinds over a :class:`~squall.core.trident.state.BackingMap`.

- :class:`TransactionalMap`: exactly once when a replayed batch holds the same tuples.
- :class:`OpaqueMap`: exactly once even when it does not (recomputed from the previous value).
- :class:`NonTransactionalMap`: **at least once**: a replayed batch is applied again. For
  values where that does no harm (a latest value, a maximum) or counts that may overcount.
- :class:`SnapshottableMap`: one global value (e.g. a count of everything) on any of them.

Each call of ``multi_update`` takes each key once: aggregate a batch per key first (as
``persistent_aggregate`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any, Generic, TypeVar

from squall.core.errors import StateError
from squall.core.trident.aggregators import CombinerUpdates
from squall.core.trident.codec import MapKind
from squall.core.trident.state import BackingMap, Key, MapState, ValueUpdater, begin, end
from squall.core.trident.values import OpaqueValue, TransactionalValue, opaque_bases

T = TypeVar("T")


class _Batched:
    """The txid of the batch in progress; begin / commit passed to the backing map."""

    def __init__(self, backing: object) -> None:
        self._backing = backing
        self._txid: int | None = None

    def begin_commit(self, txid: int) -> None:
        self._txid = txid
        begin(self._backing, txid)

    def commit(self, txid: int) -> None:
        end(self._backing, txid)
        self._txid = None

    def rollback(self, txid: int) -> None:
        end(self._backing, txid, ok=False)
        self._txid = None

    def _current(self, what: str) -> int:
        if self._txid is None:
            raise StateError(f"{what} outside a batch: call begin_commit(txid) first")
        return self._txid


def _unique(keys: Sequence[Key]) -> None:
    seen: set[Key] = set()
    for k in keys:
        if k in seen:
            raise StateError(f"key {k!r} appears twice in one update: aggregate per key first")
        seen.add(k)


class TransactionalMap(_Batched, Generic[T]):
    def __init__(self, backing: BackingMap[TransactionalValue[T]]) -> None:
        super().__init__(backing)
        self.backing = backing

    def multi_get(self, keys: Sequence[Key]) -> list[T | None]:
        return [None if v is None else v.val for v in self.backing.multi_get(keys)]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater[T]]
                     ) -> list[T]:
        txid = self._current("multi_update")
        if isinstance(updaters, CombinerUpdates):  # keys unique already: one per partial
            curs = self.backing.multi_get(keys)
            olds: list[T | None] = [None if c is None else c.val for c in curs]
            fresh = [i for i, c in enumerate(curs) if c is None or c.txid != txid]
            if len(fresh) == len(keys):
                news = updaters.apply(olds)
                self.backing.multi_put(keys, [TransactionalValue(txid, v) for v in news])
                return news
            # Some keys have this batch applied already: they stay as they are.
            got = updaters.subset(fresh).apply([olds[i] for i in fresh])
            vals: list[Any] = olds
            for i, v in zip(fresh, got, strict=True):
                vals[i] = v
            self.backing.multi_put([keys[i] for i in fresh],
                                   [TransactionalValue(txid, v) for v in got])
            return vals
        _unique(keys)
        out: list[T] = []
        put_k: list[Key] = []
        put_v: list[TransactionalValue[T]] = []
        for k, cur, up in zip(keys, self.backing.multi_get(keys), updaters, strict=True):
            if cur is not None and cur.txid == txid:
                out.append(cur.val)  # this batch was applied to this key already
                continue
            new = TransactionalValue(txid, up(None if cur is None else cur.val))
            out.append(new.val)
            put_k.append(k)
            put_v.append(new)
        if put_k:
            self.backing.multi_put(put_k, put_v)
        return out

    def multi_put(self, keys: Sequence[Key], vals: Sequence[T]) -> None:
        txid = self._current("multi_put")
        self.backing.multi_put(keys, [TransactionalValue(txid, v) for v in vals])


class OpaqueMap(_Batched, Generic[T]):
    def __init__(self, backing: BackingMap[OpaqueValue[T]]) -> None:
        super().__init__(backing)
        self.backing = backing

    def multi_get(self, keys: Sequence[Key]) -> list[T | None]:
        """As of before the batch in progress (outside a batch: the latest)."""
        return [None if v is None else v.base(self._txid) for v in self.backing.multi_get(keys)]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater[T]]
                     ) -> list[T]:
        txid = self._current("multi_update")
        if isinstance(updaters, CombinerUpdates):  # keys unique already: one per partial
            bases = opaque_bases(self.backing.multi_get(keys), txid)
            vals = updaters.apply(bases)
            if keys:
                self.backing.multi_put(keys, list(map(OpaqueValue, repeat(txid, len(keys)),
                                                      vals, bases)))
            return vals
        _unique(keys)
        news: list[OpaqueValue[T]] = []
        for cur, up in zip(self.backing.multi_get(keys), updaters, strict=True):
            if cur is None:
                news.append(OpaqueValue(txid, up(None)))
            else:
                news.append(cur.update(txid, up(cur.base(txid))))
        if keys:
            self.backing.multi_put(keys, news)
        return [n.curr for n in news]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[T]) -> None:
        txid = self._current("multi_put")
        curs = self.backing.multi_get(keys)
        self.backing.multi_put(keys, [OpaqueValue(txid, v) if c is None else c.update(txid, v)
                                      for c, v in zip(curs, vals, strict=True)])


class NonTransactionalMap(_Batched, Generic[T]):
    """At least once: every update is applied, a replayed one again."""

    def __init__(self, backing: BackingMap[T]) -> None:
        super().__init__(backing)
        self.backing = backing

    def multi_get(self, keys: Sequence[Key]) -> list[T | None]:
        return self.backing.multi_get(keys)

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater[T]]
                     ) -> list[T]:
        _unique(keys)
        news = [up(cur) for cur, up in zip(self.backing.multi_get(keys), updaters, strict=True)]
        if keys:
            self.backing.multi_put(keys, news)
        return news

    def multi_put(self, keys: Sequence[Key], vals: Sequence[T]) -> None:
        self.backing.multi_put(keys, vals)


class SnapshottableMap(Generic[T]):
    """One global value kept under ``global_key`` of a map state (Trident's, for a
    ``persistent_aggregate`` without ``group_by``)."""

    def __init__(self, delegate: MapState[T], global_key: Key = ("$GLOBAL$",)) -> None:
        self.delegate = delegate
        self.key = global_key

    def begin_commit(self, txid: int) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: int) -> None:
        self.delegate.commit(txid)

    def rollback(self, txid: int) -> None:
        self.delegate.rollback(txid)

    def get(self) -> T | None:
        return self.delegate.multi_get([self.key])[0]

    def set(self, val: T) -> None:
        self.delegate.multi_put([self.key], [val])

    def update(self, updater: ValueUpdater[T]) -> T:
        return self.delegate.multi_update([self.key], [updater])[0]


def map_state(kind: MapKind, backing: BackingMap[Any]) -> MapState[Any]:
    """The map of ``kind`` over ``backing``."""
    maps: dict[MapKind, Any] = {MapKind.TRANSACTIONAL: TransactionalMap,
                                MapKind.OPAQUE: OpaqueMap,
                                MapKind.NON_TRANSACTIONAL: NonTransactionalMap}
    made: MapState[Any] = maps[kind](backing)
    return made
