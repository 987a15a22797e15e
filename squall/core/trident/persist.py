"""One stateful task's batch, applied exactly once: ``persistent_aggregate``'s engine (pure).

For batch ``txid`` of a task, in one transaction of the store: forget the applied records of
``txid`` and later (a re-run), drop the tuples of messages an earlier batch applied and
those of a second emission (another edge record) of a message within the batch (Storm-level replays,
:mod:`squall.core.trident.applied`), aggregate the rest per key, update the
map (whose kind handles Spark-level replays by txid), and record the messages applied. A
failure rolls all of it back.

With a :class:`~squall.core.trident.maps.NonTransactionalMap` the applied records are not
kept: at least once, as Trident's non-transactional state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from squall.core.trident.aggregators import (
    CombinerAggregator,
    ReducerAggregator,
    Values,
    batch_updates,
)
from squall.core.trident.applied import AppliedSources, BatchRecord
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


@dataclass(frozen=True)
class BatchInput:
    """A batch's tuples for one task: group-by key, aggregated values, the source message
    each came from (:data:`UNKNOWN` if not known), and which emission of it they are: the
    edge record they arrived in (all of one emission's tuples for a task come in one record;
    a replay, or an upstream micro-batch that Spark ran again, sends another record)."""

    keys: Sequence[Key]
    values: Sequence[Values]
    sources: Sequence[str]
    offsets: I64
    emissions: npt.NDArray[np.int64]


@dataclass
class NewValues(Generic[T]):
    """What a batch changed: the keys and their new values (``new_values_stream``)."""

    keys: list[Key]
    values: list[T]
    skipped: int = 0


class PersistentAggregate(Generic[T]):
    def __init__(self, state: MapState[T], store: AppliedStore,
                 aggregator: CombinerAggregator[T] | ReducerAggregator[T]) -> None:
        self.state = state
        self.store = store
        self.aggregator = aggregator
        self.exact = not isinstance(state, NonTransactionalMap)

    def run(self, txid: int, batch: BatchInput, committed: dict[str, int] | None = None
            ) -> NewValues[T]:
        """Apply batch ``txid``; ``committed``: the spout's committed offsets, if known
        (records below them are dropped)."""
        self.state.begin_commit(txid)
        try:
            out = self._run(txid, batch, committed or {})
        except BaseException:
            self.state.rollback(txid)
            raise
        self.state.commit(txid)
        return out

    def _run(self, txid: int, b: BatchInput, committed: dict[str, int]) -> NewValues[T]:
        keep = np.ones(len(b.keys), np.bool_)
        applied: AppliedSources | None = None
        if self.exact:
            # Read in the transaction: another worker may have run this task's last batch.
            applied = AppliedSources(self.store.load_applied())
            gone = applied.begin(txid) + (applied.prune(committed) if committed else [])
            if gone:
                self.store.delete_applied(gone)
            srcs = np.asarray(b.sources, dtype=object)
            for s in set(b.sources) - {UNKNOWN}:
                at = np.flatnonzero(srcs == s)
                keep[at] = applied.fresh(s, b.offsets[at]) & _one_emission(
                    b.offsets[at], b.emissions[at])
        idx = np.flatnonzero(keep).tolist()
        keys, ups = batch_updates([b.keys[i] for i in idx], [b.values[i] for i in idx],
                                  self.aggregator)
        news = self.state.multi_update(keys, ups) if keys else []
        if applied is not None:
            srcs = np.asarray(b.sources, dtype=object)
            by_source = {s: b.offsets[keep & (srcs == s)] for s in set(b.sources) - {UNKNOWN}}
            self.store.put_applied(applied.applied(txid, by_source))
        return NewValues(keys, news, int(len(b.keys) - len(idx)))


def _one_emission(offsets: I64, emissions: I64) -> npt.NDArray[np.bool_]:
    """Of a message that reached the task twice within one batch (its tree replayed while the
    first emission's tuples were still queued, or an upstream micro-batch run again), the
    tuples of the first emission only."""
    first: dict[int, int] = {}
    keep = np.empty(offsets.size, np.bool_)
    for i, (o, e) in enumerate(zip(offsets.tolist(), emissions.tolist(), strict=True)):
        keep[i] = first.setdefault(o, e) == e
    return keep

