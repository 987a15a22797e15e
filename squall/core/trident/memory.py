"""An in-memory store with transactions, for unit tests (state that lives in one process
is no use to a Spark cluster): a backing map and a task's applied records, committed
together."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from squall.core.errors import StateError
from squall.core.trident.applied import BatchRecord, TaskMark
from squall.core.trident.state import Key

V = TypeVar("V")


class MemoryBackingMap(Generic[V]):
    def __init__(self) -> None:
        self.committed: dict[Key, V] = {}
        self.records: dict[int, bytes] = {}
        self._open: dict[Key, V] | None = None
        self._open_records: dict[int, bytes | None] = {}
        self.commits: list[int] = []
        self.mark = TaskMark()
        self._open_mark: TaskMark | None = None

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        view: dict[Key, Any] = {**self.committed, **(self._open or {})}
        return [view.get(k) for k in keys]

    def multi_put(self, keys: Sequence[Key], vals: Sequence[V]) -> None:
        self._need_open("multi_put")
        assert self._open is not None
        self._open.update(zip(keys, vals, strict=True))

    # ----- applied records (squall.core.trident.persist.AppliedStore) ------

    def load_applied(self) -> list[BatchRecord]:
        view = {**self.records, **self._open_records}
        return [BatchRecord.decode(r) for _, r in sorted(view.items()) if r is not None]

    def put_applied(self, rec: BatchRecord) -> None:
        self._need_open("put_applied")
        self._open_records[rec.txid] = rec.encode()

    def delete_applied(self, txids: Sequence[int]) -> None:
        self._need_open("delete_applied")
        self._open_records.update((t, None) for t in txids)

    def load_task(self) -> TaskMark:
        return self._open_mark or self.mark

    def put_task(self, mark: TaskMark) -> None:
        self._need_open("put_task")
        self._open_mark = mark

    # ----- State ---------------------------------------------------------

    def begin_commit(self, txid: int) -> None:
        if self._open is not None:
            raise StateError(f"batch {txid} began while another batch is open")
        self._open, self._open_records, self._open_mark = {}, {}, None

    def commit(self, txid: int) -> None:
        self.committed.update(self._open or {})
        for t, r in self._open_records.items():
            if r is None:
                self.records.pop(t, None)
            else:
                self.records[t] = r
        self.mark = self._open_mark or self.mark
        self._open, self._open_records, self._open_mark = None, {}, None
        self.commits.append(txid)

    def rollback(self, txid: int) -> None:
        self._open, self._open_records, self._open_mark = None, {}, None

    def _need_open(self, what: str) -> None:
        if self._open is None:
            raise StateError(f"{what} outside a transaction: begin_commit(txid) first")
