"""One stateful task's batch, applied exactly once: the engine of ``persistent_aggregate``
and ``partition_persist`` (pure).

For batch ``txid`` of a task, in one transaction of the store: forget the applied records of
``txid`` and later (a re-run), drop the tuples of messages an earlier batch applied and
those of a second emission (another edge record) of a message within the batch (Storm-level replays,
:mod:`squall.core.trident.applied`), aggregate the rest per key and update the
map (or hand them to a :class:`StateUpdater`; the map's kind handles Spark-level replays by
txid), and record the messages applied. A
failure rolls all of it back.

With a :class:`~squall.core.trident.maps.NonTransactionalMap` the applied records are not
kept: at least once, as Trident's non-transactional state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from squall.core.reliability.lineage import unit_source
from squall.core.reliability.unique import unique_first_inverse
from squall.core.trident.aggregators import (
    CodedKeys,
    CombinerAggregator,
    ReducerAggregator,
    Values,
    batch_updates,
)
from squall.core.trident.applied import AppliedSources, BatchRecord, TaskMark
from squall.core.trident.maps import NonTransactionalMap
from squall.core.trident.state import Key, MapState

T = TypeVar("T")
I64 = npt.NDArray[np.int64]
#: The source of a tuple whose source message is not known: only the txid guards it.
UNKNOWN = ""


class AppliedStore(Protocol):
    """Where a task's applied records live: the same store, the same transaction as its
    values."""

    def load_applied(self) -> list[BatchRecord]: ...

    def put_applied(self, rec: BatchRecord) -> None: ...

    def delete_applied(self, txids: Sequence[int]) -> None: ...

    def load_task(self) -> TaskMark: ...

    def put_task(self, mark: TaskMark) -> None: ...


@dataclass(frozen=True)
class BatchInput:
    """A batch's tuples for one task: group-by key, aggregated values, the source message
    each came from (:data:`UNKNOWN` if not known), and which emission of it they are: the
    edge record they arrived in (all of one emission's tuples for a task come in one record;
    an upstream micro-batch that Spark ran again sends another record, with the same roots)
    and their root (the first anchor's; None: not known). The root tells a replay apart
    within one record: a batch bolt sends one record per task for its whole micro-batch,
    a message's first emission and its replay included."""

    keys: Sequence[Key]
    values: Sequence[Values]
    sources: Sequence[str] | npt.NDArray[np.object_]
    offsets: I64
    emissions: npt.NDArray[np.int64]
    roots: npt.NDArray[np.uint64] | None = None


class NewValues:
    """What a batch emits on the bolt's stream (``new_values_stream``): for an aggregate,
    each changed key's fields with its new value; for an updater, what it emitted. The
    rows are made when first asked for (a state with no stream out never pays for them)."""

    def __init__(self, rows: Callable[[], list[tuple[Any, ...]]], skipped: int = 0,
                 txid: int = 0) -> None:
        self._make: Callable[[], list[tuple[Any, ...]]] | None = rows
        self._rows: list[tuple[Any, ...]] = []
        self.skipped = skipped
        #: the batch's txid
        self.txid = txid

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        if self._make is not None:
            self._rows, self._make = self._make(), None
        return self._rows


class StateUpdater(Protocol[T]):
    """Trident's ``StateUpdater`` (``partition_persist``): apply a batch's tuples (their
    input fields' values) to the state, which is in batch ``txid``; emit what changed."""

    def update_state(self, state: MapState[T], tuples: Sequence[Values],
                     collector: Collector) -> None: ...


class Collector:
    """Where a :class:`StateUpdater` emits (Trident's ``TridentCollector``)."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def emit(self, values: Sequence[Any]) -> None:
        self.rows.append(tuple(values))


class _ExactBatches(Generic[T]):
    """A task's batches applied exactly once: the txid for Spark's re-runs, the applied
    records for Storm's replays; what a batch does with its fresh tuples is
    :meth:`_apply`'s."""

    def __init__(self, state: MapState[T], store: AppliedStore) -> None:
        self.state = state
        self.store = store
        self.exact = not isinstance(state, NonTransactionalMap)
        # The applied records as this task's last batch left them, and the mark it wrote:
        # kept while the stored mark is that one (no other worker has run the task since),
        # instead of reading and decoding every record again each batch (they are kept
        # until the spouts' commits pass them: hundreds of batches at full rate).
        self._known: tuple[TaskMark, AppliedSources] | None = None
        self._next: tuple[TaskMark, AppliedSources] | None = None

    def run(self, txid: int | None, batch: BatchInput,
            committed: Mapping[str, int] | None = None) -> NewValues:
        """Apply a batch as ``txid`` (None: the one after the task's last; run one batch of
        a task at a time); ``committed``: the spout's committed offsets, if known (tuples
        and records below them are dropped)."""
        if txid is None:
            txid = self.store.load_task().txid + 1
        self.state.begin_commit(txid)
        self._known, known = None, self._known  # whatever happens, until the commit
        self._next = None
        try:
            out = self._run(txid, batch, committed or {}, known)
        except BaseException:
            self.state.rollback(txid)
            raise
        self.state.commit(txid)
        self._known, self._next = self._next, None
        return out

    def _run(self, txid: int, b: BatchInput, committed: Mapping[str, int],
             known: tuple[TaskMark, AppliedSources] | None) -> NewValues:
        keep = np.ones(len(b.keys), np.bool_)
        applied: AppliedSources | None = None
        srcs = np.asarray(b.sources, dtype=object)
        sources = set(b.sources) - {UNKNOWN}
        # Read in the transaction: another worker may have run this task's last batch.
        stored = self.store.load_task()
        mark = stored.raised(txid, committed)
        if self.exact:
            applied = known[1] if known is not None and known[0] == stored else \
                AppliedSources(self.store.load_applied())
            gone = applied.begin(txid) + applied.prune(mark.floors)
            if gone:
                self.store.delete_applied(gone)
            for s in sources:
                at = np.flatnonzero(srcs == s)
                offs = b.offsets[at]
                keep[at] = applied.fresh(s, offs) & \
                    (offs >= mark.floors.get(unit_source(s), -1)) & \
                    _one_emission(offs, b.emissions[at], None if b.roots is None else b.roots[at])
        if keep.all():  # the common case: nothing applied before
            n_kept = len(b.keys)
            rows = self._apply(b.keys, b.values)
        else:
            at = np.flatnonzero(keep)
            idx = at.tolist()
            n_kept = len(idx)
            rows = self._apply(b.keys.take(at) if isinstance(b.keys, CodedKeys) else
                               [b.keys[i] for i in idx], [b.values[i] for i in idx])
        if applied is not None:
            by_source = {s: b.offsets[keep & (srcs == s)] for s in sources}
            self.store.put_applied(applied.applied(txid, by_source))
            self._next = (mark, applied)
        self.store.put_task(mark)
        return NewValues(rows, len(b.keys) - n_kept, txid)

    def _apply(self, keys: Sequence[Key], values: Sequence[Values]
               ) -> Callable[[], list[tuple[Any, ...]]]:
        raise NotImplementedError


class PersistentAggregate(_ExactBatches[T]):
    """Trident's ``persistentAggregate``: each key's tuples aggregated into its value."""

    def __init__(self, state: MapState[T], store: AppliedStore,
                 aggregator: CombinerAggregator[T] | ReducerAggregator[T]) -> None:
        super().__init__(state, store)
        self.aggregator = aggregator

    def _apply(self, keys: Sequence[Key], values: Sequence[Values]
               ) -> Callable[[], list[tuple[Any, ...]]]:
        uniq, ups = batch_updates(keys, values, self.aggregator)
        news = self.state.multi_update(uniq, ups) if uniq else []
        return lambda: [(*k, v) for k, v in zip(uniq, news, strict=True)]


class PartitionPersist(_ExactBatches[T]):
    """Trident's ``partitionPersist``: a :class:`StateUpdater` given the fresh tuples."""

    def __init__(self, state: MapState[T], store: AppliedStore, updater: StateUpdater[T]
                 ) -> None:
        super().__init__(state, store)
        self.updater = updater

    def _apply(self, keys: Sequence[Key], values: Sequence[Values]
               ) -> Callable[[], list[tuple[Any, ...]]]:
        out = Collector()
        if values:
            self.updater.update_state(self.state, values, out)
        return lambda: out.rows


def _one_emission(offsets: I64, records: I64, roots: npt.NDArray[np.uint64] | None
                  ) -> npt.NDArray[np.bool_]:
    """Of a message that reached the task twice within one batch (its tree replayed while the
    first emission's tuples were still queued, or an upstream micro-batch run again), the
    tuples of the first emission only: those of its first tuple's record and root."""
    if not offsets.size:
        return np.ones(0, np.bool_)
    _, first, inverse = unique_first_inverse(offsets)
    keep: npt.NDArray[np.bool_] = records == records[first][inverse]
    if roots is not None:
        keep &= roots == roots[first][inverse]
    return keep
