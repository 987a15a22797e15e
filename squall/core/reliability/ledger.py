"""The acker's XOR ledger: one entry per pending tuple tree, applied in batches.

Storm's ``Acker.java`` keeps a ``RotatingMap<root, AckObject>``; this is the
same state machine over a packed open-addressing table so that a whole batch
of records is applied with a handful of numpy operations and a pending tree
costs ~30 bytes per slot instead of a few hundred for a dict of objects.

Per root the ledger keeps:
- ``value``: XOR of every edge id seen (init and acks); 0 once all are acked;
- the spout task (known once the init arrived) and two flags (init seen, failed);
- ``born``: timestamp of its first record (complete latency is measured from it);
- ``touched``: timestamp of its first record or last reset (timeouts run from it);
- ``seq``: the caller's sequence number of the batch that created it, so the
  acker can tell the earliest input position a pending tree still needs.

Rules (Storm's, with one deliberate change):
- a tree is decided only once its init has been seen (its spout task is known);
- failed (a fail arrived, before or after init) -> FAILED; Storm checks
  ``val == 0`` first and can report a failed tree as acked, we never do;
- otherwise ``value == 0`` -> ACKED;
- a tree untouched for ``timeout_ms`` -> TIMED_OUT at the next rotation; a tree
  whose init never came is dropped silently there (no spout to tell).

Timestamps are stored as their low 32 bits and compared modulo 2**32, so ages
are exact up to ~24 days: far beyond any message timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from squall.core.errors import LedgerError
from squall.core.reliability.ids import TOMBSTONE
from squall.core.reliability.records import (
    MAX_TASK,
    AckerBatch,
    Outcome,
    RecordKind,
    Results,
    root_runs,
)

_TOMB = np.uint64(TOMBSTONE)
_ZERO = np.uint64(0)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_INIT_BIT = np.uint16(1 << 14)
_FAIL_BIT = np.uint16(1 << 15)
_TASK_MASK = np.uint16(MAX_TASK)
_LOW32 = 0xFFFFFFFF
# Past this fill (live + deleted slots) the table is rebuilt, bigger if needed.
_MAX_LOAD = 0.75
_MIN_CAPACITY = 64

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A pending tree as the ledger sees it (a query result, for tests and tools)."""

    root: int
    value: int
    task: int | None
    failed: bool
    born_ms32: int
    touched_ms32: int
    seq: int


class Ledger:
    """Pending tuple trees of one acker task."""

    def __init__(
        self,
        timeout_ms: int,
        *,
        rotation_ms: int | None = None,
        now_ms: int = 0,
        initial_capacity: int = 1024,
    ) -> None:
        if timeout_ms < 0:
            raise LedgerError(f"timeout_ms must be >= 0 (0 = never), got {timeout_ms}")
        if timeout_ms >= 1 << 31:
            raise LedgerError(f"timeout_ms must be below 2**31 ms (~24 days), got {timeout_ms}")
        self.timeout_ms = timeout_ms
        # Storm rotates every T with several buckets; expiring at the first
        # rotation after age >= T bounds a tree's life to T + rotation.
        self.rotation_ms = rotation_ms if rotation_ms is not None else max(1, timeout_ms // 4)
        if self.rotation_ms <= 0:
            raise LedgerError(f"rotation_ms must be positive, got {rotation_ms}")
        self._next_rotation = now_ms + self.rotation_ms
        self._min_capacity = _pow2_at_least(max(initial_capacity, _MIN_CAPACITY))
        self._live = 0
        self._tombs = 0
        #: Trees dropped at expiry whose init never arrived (nobody to tell).
        self.orphans_expired = 0
        self._alloc(self._min_capacity)

    # ----- queries -------------------------------------------------------

    def __len__(self) -> int:
        return self._live

    @property
    def capacity(self) -> int:
        return int(self._keys.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self._columns())

    def get(self, root: int) -> LedgerEntry | None:
        slot = self._find_one(root)
        if slot < 0:
            return None
        meta = int(self._meta[slot])
        return LedgerEntry(
            root=root,
            value=int(self._vals[slot]),
            task=(meta & int(_TASK_MASK)) if meta & int(_INIT_BIT) else None,
            failed=bool(meta & int(_FAIL_BIT)),
            born_ms32=int(self._born[slot]),
            touched_ms32=int(self._touched[slot]),
            seq=int(self._seq[slot]),
        )

    def roots(self) -> npt.NDArray[np.uint64]:
        return self._keys[self._live_mask()]

    def low_seq(self) -> int | None:
        """The smallest batch sequence number any pending tree was created in."""
        if self._live == 0:
            return None
        return int(self._seq[self._live_mask()].min())

    def next_rotation_ms(self) -> int:
        return self._next_rotation

    # ----- effects -------------------------------------------------------

    def apply(self, batch: AckerBatch, now_ms: int,
              seq: int | npt.NDArray[np.int64] = 0) -> Results:
        """Apply a batch of records; return the trees it decided (and resets of known trees).

        ``seq`` tags the trees this batch creates (see :meth:`low_seq`): one
        number, or one per record (a tree takes the smallest of its records').
        """
        n = len(batch)
        if n == 0:
            return Results.empty()
        kinds = batch.kinds
        is_init = kinds == RecordKind.INIT
        if is_init.any() and int(batch.tasks[is_init].max()) > MAX_TASK:
            raise LedgerError(f"spout task above {MAX_TASK} in batch (seq {seq})")
        is_fail = kinds == RecordKind.FAIL
        is_reset = kinds == RecordKind.RESET

        # 1. Coalesce the batch to one row per root.
        order, starts = root_runs(batch.roots)
        uroots = batch.roots[order][starts]
        carries = is_init | (kinds == RecordKind.ACK)
        xor = np.bitwise_xor.reduceat(np.where(carries, batch.values, _ZERO)[order], starts)
        got_init = np.logical_or.reduceat(is_init[order], starts)
        got_fail = np.logical_or.reduceat(is_fail[order], starts)
        got_reset = np.logical_or.reduceat(is_reset[order], starts)
        ts_min = np.minimum.reduceat(batch.ts_ms[order], starts)
        task = np.maximum.reduceat(np.where(is_init, batch.tasks, 0)[order], starts)

        # 2. Find or create a slot for every root.
        self._reserve(len(uroots))
        slots, is_new = self._find_or_insert(uroots)
        if is_new.any():
            fresh = slots[is_new]
            self._vals[fresh] = 0
            self._meta[fresh] = 0
            born = (ts_min[is_new] & _LOW32).astype(np.uint32)
            self._born[fresh] = born
            self._touched[fresh] = born
            if isinstance(seq, np.ndarray):
                first_seq = np.minimum.reduceat(seq[order], starts)[is_new]
                self._seq[fresh] = (first_seq & _LOW32).astype(np.uint32)
            else:
                self._seq[fresh] = np.uint32(seq & _LOW32)

        # 3. Fold the coalesced rows in.
        self._vals[slots] ^= xor
        meta = self._meta[slots]
        meta = np.where(got_init, (meta & ~_TASK_MASK) | _INIT_BIT | task.astype(np.uint16), meta)
        meta = np.where(got_fail, meta | _FAIL_BIT, meta).astype(np.uint16)
        self._meta[slots] = meta
        if got_reset.any():
            reset_ts = np.maximum.reduceat(np.where(is_reset, batch.ts_ms, 0)[order], starts)
            rs = slots[got_reset]
            self._touched[rs] = (reset_ts[got_reset] & _LOW32).astype(np.uint32)

        # 4. Decide.
        has_init = (meta & _INIT_BIT) != 0
        failed = (meta & _FAIL_BIT) != 0
        done = has_init & (failed | (self._vals[slots] == _ZERO))
        reset_known = got_reset & has_init & ~done
        report = done | reset_known
        if not report.any():
            return Results.empty()
        rslots = slots[report]
        outcomes = np.where(
            failed[report], np.uint8(Outcome.FAILED),
            np.where(done[report], np.uint8(Outcome.ACKED), np.uint8(Outcome.RESET)),
        ).astype(np.uint8)
        results = Results(
            roots=uroots[report],
            tasks=(meta[report] & _TASK_MASK).astype(np.uint16),
            outcomes=outcomes,
            latency_ms=self._age(rslots, now_ms, self._born),
        )
        self._delete(slots[done])
        return results

    def expire(self, now_ms: int) -> Results:
        """Rotate if a rotation is due: time out trees untouched for ``timeout_ms``.

        The clock may be event time (a backlog being re-read) and so may be
        behind the last call's: a clock that moved back re-anchors the schedule.
        """
        behind = now_ms < self._next_rotation - self.rotation_ms
        if self.timeout_ms == 0 or (now_ms < self._next_rotation and not behind):
            return Results.empty()
        self._next_rotation = now_ms + self.rotation_ms
        if self._live == 0:
            return Results.empty()
        live = np.flatnonzero(self._live_mask())
        age = self._age(live, now_ms, self._touched)
        gone = live[age >= self.timeout_ms]
        if gone.size == 0:
            return Results.empty()
        meta = self._meta[gone]
        known = (meta & _INIT_BIT) != 0
        self.orphans_expired += int((~known).sum())
        told = gone[known]
        results = Results(
            roots=self._keys[told].copy(),
            tasks=(meta[known] & _TASK_MASK).astype(np.uint16),
            outcomes=np.full(told.size, Outcome.TIMED_OUT, np.uint8),
            latency_ms=self._age(told, now_ms, self._born),
        )
        self._delete(gone)
        return results

    def rebase_seq(self, delta: int) -> None:
        """Subtract ``delta`` from every pending tree's seq (clamped at 0).

        Seqs are 32-bit: a caller whose sequence numbers grow past 2**31
        rebases instead of wrapping.
        """
        if delta <= 0:
            return
        live = self._live_mask()
        seq = self._seq[live].astype(np.int64) - delta
        self._seq[live] = np.maximum(seq, 0).astype(np.uint32)

    # ----- the table -----------------------------------------------------

    def _columns(self) -> tuple[npt.NDArray[np.generic], ...]:
        return (self._keys, self._vals, self._born, self._touched, self._seq, self._meta)

    def _alloc(self, capacity: int) -> None:
        self._keys = np.zeros(capacity, np.uint64)
        self._vals = np.zeros(capacity, np.uint64)
        self._born = np.zeros(capacity, np.uint32)
        self._touched = np.zeros(capacity, np.uint32)
        self._seq = np.zeros(capacity, np.uint32)
        self._meta = np.zeros(capacity, np.uint16)
        self._shift = np.uint64(64 - capacity.bit_length() + 1)
        self._mask = capacity - 1
        self._live = 0
        self._tombs = 0

    def _live_mask(self) -> npt.NDArray[np.bool_]:
        k = self._keys
        live: npt.NDArray[np.bool_] = (k != _ZERO) & (k != _TOMB)
        return live

    def _home(self, roots: npt.NDArray[np.uint64]) -> I64:
        # Fibonacci hashing: the high bits of root * golden ratio.
        return ((roots * _GOLDEN) >> self._shift).astype(np.int64)

    @staticmethod
    def _age(slots: I64, now_ms: int, col: npt.NDArray[np.uint32]) -> I64:
        now32 = np.uint32(now_ms & _LOW32)
        age = (now32 - col[slots]).view(np.int32).astype(np.int64)
        return np.maximum(age, 0)

    def _reserve(self, incoming: int) -> None:
        cap = self.capacity
        if self._live + self._tombs + incoming <= _MAX_LOAD * cap:
            return
        need = self._live + incoming
        new_cap = self._min_capacity
        while need > _MAX_LOAD * new_cap or (new_cap < cap and need > _MAX_LOAD * new_cap / 2):
            new_cap *= 2
        self._rehash(new_cap)

    def _rehash(self, capacity: int) -> None:
        live = self._live_mask()
        keys = self._keys[live]
        cols = [c[live] for c in self._columns()[1:]]
        self._alloc(capacity)
        slots, _ = self._find_or_insert(keys)
        for dst, src in zip(self._columns()[1:], cols, strict=True):
            dst[slots] = src

    def _delete(self, slots: I64) -> None:
        if slots.size:
            self._keys[slots] = _TOMB
            self._live -= int(slots.size)
            self._tombs += int(slots.size)

    def _find_one(self, root: int) -> int:
        keys, mask = self._keys, self._mask
        p = int(self._home(np.array([root], np.uint64))[0])
        r = np.uint64(root)
        while True:
            k = keys[p]
            if k == r:
                return p
            if k == _ZERO:
                return -1
            p = (p + 1) & mask

    def _find_or_insert(self, roots: npt.NDArray[np.uint64]) -> tuple[I64, npt.NDArray[np.bool_]]:
        """Slots of ``roots`` (unique), inserting the missing ones (keys only).

        Linear probing, vectorized: each round moves every unresolved root one
        slot on. A missing root takes the first free slot (empty or deleted)
        on its path; roots of this batch that race for one slot take turns.
        """
        keys, mask = self._keys, self._mask
        m = int(roots.shape[0])
        slot = np.full(m, -1, np.int64)
        free = np.full(m, -1, np.int64)
        active = np.arange(m)
        pos = self._home(roots)
        while active.size:
            k = keys[pos]
            hit = k == roots[active]
            empty = k == _ZERO
            maybe_free = (empty | (k == _TOMB)) & (free[active] < 0)
            if hit.any():
                slot[active[hit]] = pos[hit]
            if maybe_free.any():
                free[active[maybe_free]] = pos[maybe_free]
            go_on = ~(hit | empty)
            active = active[go_on]
            pos = (pos[go_on] + 1) & mask
        is_new = slot < 0
        todo = np.flatnonzero(is_new)
        pos = free[todo]
        while todo.size:
            _, first = np.unique(pos, return_index=True)
            won = np.zeros(todo.size, np.bool_)
            won[first] = True
            taken = pos[won]
            self._tombs -= int((keys[taken] == _TOMB).sum())
            keys[taken] = roots[todo[won]]
            slot[todo[won]] = taken
            self._live += int(taken.size)
            todo, pos = todo[~won], (pos[~won] + 1) & mask
            # Losers walk on to the next free slot.
            while todo.size:
                k = keys[pos]
                busy = (k != _ZERO) & (k != _TOMB)
                if not busy.any():
                    break
                pos = np.where(busy, (pos + 1) & mask, pos)
        return slot, is_new


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
