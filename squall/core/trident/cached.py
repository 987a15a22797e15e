"""Trident's ``CachedMap``: an LRU of recent values in front of a backing map.

Reads that hit skip the store; writes go through to it. A micro-batch that failed may have
put values its transaction never committed, and a task's next batch may run in another
Python worker whose cache is older: :meth:`clear` before trusting the cache again (the
state bolt does, on rollback and when a task's last batch ran elsewhere).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Generic, TypeVar

from squall.core.errors import StateError
from squall.core.trident.state import BackingMap, Key, begin, end

V = TypeVar("V")


class CachedMap(Generic[V]):
    def __init__(self, backing: BackingMap[V], cache_size: int = 10_000) -> None:
        if cache_size < 1:
            raise StateError(f"cache_size {cache_size} must be at least 1")
        self.backing = backing
        self.size = cache_size
        self._lru: OrderedDict[Key, V] = OrderedDict()
        self.hits = self.misses = 0

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        out: list[V | None] = [None] * len(keys)
        missing: list[int] = []
        for i, k in enumerate(keys):
            if k in self._lru:
                self._lru.move_to_end(k)
                out[i] = self._lru[k]
            else:
                missing.append(i)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        if missing:
            got = self.backing.multi_get([keys[i] for i in missing])
            for i, v in zip(missing, got, strict=True):
                out[i] = v
                if v is not None:
                    self._remember(keys[i], v)
        return out

    def multi_put(self, keys: Sequence[Key], vals: Sequence[V]) -> None:
        self.backing.multi_put(keys, vals)
        for k, v in zip(keys, vals, strict=True):
            self._remember(k, v)

    def clear(self) -> None:
        self._lru.clear()

    def begin_commit(self, txid: int) -> None:
        begin(self.backing, txid)

    def commit(self, txid: int) -> None:
        end(self.backing, txid)

    def rollback(self, txid: int) -> None:
        self.clear()
        end(self.backing, txid, ok=False)

    def _remember(self, k: Key, v: V) -> None:
        self._lru[k] = v
        self._lru.move_to_end(k)
        while len(self._lru) > self.size:
            self._lru.popitem(last=False)
