"""Acker records and acker results, scalar and columnar.

A record is what bolts and spouts send the acker (``init``, ``ack``, ``fail``,
``reset``); a result is what the acker sends back to a spout task. The
columnar forms are what the ledger applies and the wire formats carry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from squall.core.reliability.unique import run_starts

#: Spout task ids share a 16-bit column with two flag bits in the ledger.
MAX_TASK = (1 << 14) - 1


class RecordKind(IntEnum):
    INIT = 1
    ACK = 2
    FAIL = 3
    RESET = 4


class Outcome(IntEnum):
    ACKED = 1
    FAILED = 2
    TIMED_OUT = 3
    RESET = 4


@dataclass(frozen=True, slots=True)
class AckerRecord:
    """One record for the acker. ``value`` matters for init and ack, ``task`` for init."""

    kind: RecordKind
    root: int
    value: int = 0
    task: int = 0


@dataclass(frozen=True, slots=True)
class Result:
    """One tree decided by the acker, for spout task ``task``."""

    root: int
    task: int
    outcome: Outcome
    latency_ms: int = 0


@dataclass(frozen=True)
class AckerBatch:
    """Records as parallel arrays: what one or more Kafka messages carried."""

    roots: npt.NDArray[np.uint64]
    values: npt.NDArray[np.uint64]
    kinds: npt.NDArray[np.uint8]
    tasks: npt.NDArray[np.uint16]
    ts_ms: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.roots.shape[0])

    @classmethod
    def empty(cls) -> AckerBatch:
        return cls(
            np.empty(0, np.uint64),
            np.empty(0, np.uint64),
            np.empty(0, np.uint8),
            np.empty(0, np.uint16),
            np.empty(0, np.int64),
        )

    @classmethod
    def from_records(cls, records: Sequence[AckerRecord], ts_ms: int) -> AckerBatch:
        n = len(records)
        return cls(
            np.fromiter((r.root for r in records), np.uint64, n),
            np.fromiter((r.value if r.kind <= RecordKind.ACK else 0 for r in records),
                        np.uint64, n),
            np.fromiter((int(r.kind) for r in records), np.uint8, n),
            np.fromiter((r.task for r in records), np.uint16, n),
            np.full(n, ts_ms, np.int64),
        )

    @classmethod
    def acks(cls, roots: Sequence[int], values: Sequence[int], ts_ms: int) -> AckerBatch:
        """An ACK record for each root with its value: a per-tuple bolt's thousands a
        micro-batch, kept as two lists of ints rather than a record object each."""
        n = len(roots)
        return cls(np.array(roots, np.uint64), np.array(values, np.uint64),
                   np.full(n, RecordKind.ACK, np.uint8), np.zeros(n, np.uint16),
                   np.full(n, ts_ms, np.int64))

    @classmethod
    def fails(cls, roots: npt.NDArray[np.uint64], ts_ms: int) -> AckerBatch:
        """A FAIL record for each of ``roots``."""
        n = int(roots.size)
        return cls(roots, np.zeros(n, np.uint64), np.full(n, RecordKind.FAIL, np.uint8),
                   np.zeros(n, np.uint16), np.full(n, ts_ms, np.int64))

    def to_records(self) -> list[AckerRecord]:
        """The inverse of :meth:`from_records` (timestamps aside)."""
        return [AckerRecord(RecordKind(k), r, v, t) for r, v, k, t in zip(
            self.roots.tolist(), self.values.tolist(), self.kinds.tolist(), self.tasks.tolist(),
            strict=True)]

    def select(self, which: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> AckerBatch:
        """The records a mask picks, or those at the given indices (in their order)."""
        return AckerBatch(self.roots[which], self.values[which], self.kinds[which],
                          self.tasks[which], self.ts_ms[which])

    def of_kind(self, kind: RecordKind) -> AckerBatch:
        """The records of one kind (a bolt's are usually all acks: then no copy)."""
        mask = self.kinds == kind
        k = int(np.count_nonzero(mask))
        return self if k == len(self) else AckerBatch.empty() if k == 0 else self.select(mask)

    def coalesced(self) -> AckerBatch:
        """The same records, XOR-coalesced: one ack per root (its acks' values XORed), one
        fail and one reset per root; inits kept as they are (each carries its spout task).
        Inits first, then acks, fails and resets, each in root order."""
        out = [self.of_kind(RecordKind.INIT)]
        acks = self.of_kind(RecordKind.ACK)
        if len(acks):
            # Neighbours first, in one pass: a tree's acks mostly come together (a split's
            # words of one sentence, routed in order), so the sort sees one record a run
            # instead of every ack.
            acks = acks._xor_runs(np.flatnonzero(run_starts(acks.roots)))
            order, starts = root_runs(acks.roots)
            out.append(acks.select(order)._xor_runs(starts))
        for kind in (RecordKind.FAIL, RecordKind.RESET):
            once = self.of_kind(kind)
            if len(once):
                order, starts = root_runs(once.roots, stable=True)  # the first of each
                out.append(once.select(order[starts]))
        return AckerBatch.concat(out)

    def _xor_runs(self, starts: npt.NDArray[np.intp]) -> AckerBatch:
        """One ack a run (the records from each of ``starts`` to the next): the values
        XORed, the highest task, the earliest time."""
        if starts.size == len(self):
            return self
        return AckerBatch(self.roots[starts], np.bitwise_xor.reduceat(self.values, starts),
                          self.kinds[starts], np.maximum.reduceat(self.tasks, starts),
                          np.minimum.reduceat(self.ts_ms, starts))

    @classmethod
    def concat(cls, batches: Iterable[AckerBatch]) -> AckerBatch:
        bs = [b for b in batches if len(b)]
        if not bs:
            return cls.empty()
        if len(bs) == 1:
            return bs[0]
        return cls(
            np.concatenate([b.roots for b in bs]),
            np.concatenate([b.values for b in bs]),
            np.concatenate([b.kinds for b in bs]),
            np.concatenate([b.tasks for b in bs]),
            np.concatenate([b.ts_ms for b in bs]),
        )

    def records(self) -> list[AckerRecord]:
        return [
            AckerRecord(RecordKind(int(k)), int(r), int(v), int(t))
            for r, v, k, t in zip(self.roots, self.values, self.kinds, self.tasks, strict=True)
        ]


@dataclass(frozen=True)
class Results:
    """Decided trees as parallel arrays."""

    roots: npt.NDArray[np.uint64]
    tasks: npt.NDArray[np.uint16]
    outcomes: npt.NDArray[np.uint8]
    latency_ms: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.roots.shape[0])

    @classmethod
    def empty(cls) -> Results:
        return cls(np.empty(0, np.uint64), np.empty(0, np.uint16), np.empty(0, np.uint8),
                   np.empty(0, np.int64))

    @classmethod
    def from_results(cls, results: Sequence[Result]) -> Results:
        n = len(results)
        return cls(
            np.fromiter((r.root for r in results), np.uint64, n),
            np.fromiter((r.task for r in results), np.uint16, n),
            np.fromiter((int(r.outcome) for r in results), np.uint8, n),
            np.fromiter((r.latency_ms for r in results), np.int64, n),
        )

    @classmethod
    def concat(cls, parts: Iterable[Results]) -> Results:
        ps = [p for p in parts if len(p)]
        if not ps:
            return cls.empty()
        if len(ps) == 1:
            return ps[0]
        return cls(
            np.concatenate([p.roots for p in ps]),
            np.concatenate([p.tasks for p in ps]),
            np.concatenate([p.outcomes for p in ps]),
            np.concatenate([p.latency_ms for p in ps]),
        )

    def select(self, mask: npt.NDArray[np.bool_]) -> Results:
        return Results(self.roots[mask], self.tasks[mask], self.outcomes[mask],
                       self.latency_ms[mask])

    def slice(self, lo: int, hi: int) -> Results:
        return Results(self.roots[lo:hi], self.tasks[lo:hi], self.outcomes[lo:hi],
                       self.latency_ms[lo:hi])

    def results(self) -> list[Result]:
        return [
            Result(int(r), int(t), Outcome(int(o)), int(lat))
            for r, t, o, lat in zip(self.roots, self.tasks, self.outcomes, self.latency_ms,
                                    strict=True)
        ]

    def by_root(self) -> dict[int, Outcome]:
        return {int(r): Outcome(int(o)) for r, o in zip(self.roots, self.outcomes, strict=True)}


def root_runs(roots: npt.NDArray[np.uint64], stable: bool = False
              ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Records grouped by root: ``order`` sorts them by root, ``starts`` are where each
    root's run begins in that order (for ``np.ufunc.reduceat``). Within a run the records
    keep their own order only if ``stable``: what picks one record of a run needs it, a
    reduction over the run does not, and NumPy's default sort is several times faster than
    the stable one on random 64-bit roots."""
    order = np.argsort(roots, kind="stable" if stable else None)
    return order, np.flatnonzero(run_starts(roots[order]))
