"""Which offsets of one source partition may be committed (Storm's ``OffsetManager``).

Each emitted offset is PENDING (in flight) until its tree is acked (DONE) or
failed. A failed one waits for its retry (FAILED, with a due time) or, past
the retry limit, is handed to the caller to dead-letter, and is DONE once that
is confirmed. The commit point is the contiguous DONE prefix; offsets never
emitted inside the window (compaction gaps, transaction markers) are skipped, as
Storm does, and so are those after the last record once the reader's position has
passed them (:meth:`passed`). A commit is applied only after Kafka confirmed it
(:meth:`committed`).

Offsets arrive from Kafka in increasing order, so the window is a packed,
append-only table (numpy columns: offset, state, failures, emit time) indexed
by position; finding an offset is arithmetic when the window has no gaps and
a binary search otherwise. Nothing is kept per offset as a Python object but
the caller's payload (what a replay and a dead letter need): at 100k messages a
second, per-offset dicts and tuples cost more than all the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from squall.core.errors import OffsetError
from squall.core.reliability.retry import RetrySchedule

I64 = npt.NDArray[np.int64]


class OffsetState(Enum):
    PENDING = "pending"
    FAILED = "failed"
    DEAD_LETTERING = "dead_lettering"
    DONE = "done"


_PENDING, _FAILED, _DEAD_LETTERING, _DONE = 1, 2, 3, 4
_STATES = {_PENDING: OffsetState.PENDING, _FAILED: OffsetState.FAILED,
           _DEAD_LETTERING: OffsetState.DEAD_LETTERING, _DONE: OffsetState.DONE}
#: attempts as the root ids carry them (squall.core.reliability.ids.derive_roots)
ATTEMPT_MASK = 0xFF


@dataclass(frozen=True, slots=True)
class Retry:
    """Replay the offset at ``due_ms``; this will be delivery ``failures + 1``."""

    offset: int
    due_ms: int
    failures: int


@dataclass(frozen=True, slots=True)
class GiveUp:
    """Retries are exhausted: dead-letter the message, then call :meth:`OffsetManager.acked`."""

    offset: int
    failures: int


@dataclass(frozen=True, slots=True)
class Whereabouts:
    """Where one offset is, as its partition's table knows it: ``unread``, ``pending``,
    ``failed`` (waiting for its retry), ``dead_lettering``, ``done`` (its tree complete or
    it dead-lettered, the commit to come) or ``committed``."""

    state: str
    #: its trees that failed so far (its delivery attempt is one more)
    failures: int = 0
    #: pending: when it was emitted, or its timeout last reset
    since_ms: int | None = None
    #: failed: when its retry is due
    retry_ms: int | None = None


class OffsetManager:
    """Emitted / acked / failed offsets of one source partition."""

    def __init__(
        self,
        committed: int,
        retry: RetrySchedule | None = None,
        max_uncommitted: int | None = None,
    ) -> None:
        if committed < 0:
            raise OffsetError(f"committed offset must be >= 0, got {committed}")
        if max_uncommitted is not None and max_uncommitted <= 0:
            raise OffsetError(f"max_uncommitted must be positive, got {max_uncommitted}")
        self.retry = retry or RetrySchedule()
        self.max_uncommitted = max_uncommitted
        self._committed = committed
        self._end = committed  # one past the highest offset ever emitted
        # The window: positions [_head, _n) hold emitted offsets >= committed, increasing.
        cap = 1024
        self._off = np.zeros(cap, np.int64)
        self._state = np.zeros(cap, np.uint8)
        self._fails = np.zeros(cap, np.int32)
        self._stamp = np.zeros(cap, np.int64)  # when emitted (or its timeout was reset)
        # Aligned with positions; an array, so that letting acked payloads go is one
        # assignment (a Python loop over them was 7 % of the spout's time at half rate).
        self._payload: npt.NDArray[np.object_] = np.full(cap, None, object)
        self._head = 0
        self._n = 0
        self._scan = 0  # memo: positions [_head, _scan) are DONE
        self._open = 0  # not DONE
        self._in_flight = 0  # PENDING
        self._failed: dict[int, int] = {}  # FAILED offset -> due time

    # ----- queries -------------------------------------------------------

    @property
    def committed_offset(self) -> int:
        return self._committed

    @property
    def fetched_end(self) -> int:
        """One past the highest offset emitted: where reading goes on after retries."""
        return self._end

    def state(self, offset: int) -> OffsetState:
        p = self._pos(offset)
        if p is not None:
            return _STATES[int(self._state[p])]
        if offset < self._end:
            return OffsetState.DONE  # committed, or a gap that never existed
        raise OffsetError(f"offset {offset} was never emitted (emitted up to {self._end - 1})")

    def whereabouts(self, offset: int) -> Whereabouts:
        if offset < self._committed:
            return Whereabouts("committed")
        p = self._pos(offset)
        if p is None:
            return Whereabouts("done" if offset < self._end else "unread")
        st = int(self._state[p])
        return Whereabouts(_STATES[st].value, int(self._fails[p]),
                           int(self._stamp[p]) if st == _PENDING else None,
                           self._failed.get(offset))

    def failures(self, offset: int) -> int:
        p = self._pos(offset)
        return int(self._fails[p]) if p is not None else 0

    def payload(self, offset: int) -> Any:
        """What the caller passed when ``offset`` was emitted (None once it is done)."""
        p = self._pos(offset)
        return self._payload[p] if p is not None else None

    @property
    def num_pending(self) -> int:
        """Offsets emitted and not yet done (pending, failed or being dead-lettered)."""
        return self._open

    @property
    def in_flight(self) -> int:
        """Offsets whose tree is out (PENDING): what max spout pending counts."""
        return self._in_flight

    @property
    def num_uncommitted(self) -> int:
        return self._n - self._head

    def at_capacity(self) -> bool:
        """True while no new offset may be emitted (retries still may)."""
        return self.max_uncommitted is not None and self.num_uncommitted >= self.max_uncommitted

    def should_emit(self, offset: int, now_ms: int) -> bool:
        """Whether a record just read at ``offset`` is to be emitted.

        New offsets are; after a seek back, only failed ones whose retry is due
        are: done and pending ones are not emitted again.
        """
        if offset >= self._end:
            return offset >= self._committed
        due = self._failed.get(offset)
        return due is not None and due <= now_ms

    def next_commit_offset(self) -> int | None:
        """The offset to commit (next to read), if it is past the committed one: the first
        offset not done, or with none open, the end of what was read (offsets without a
        record before it, as :meth:`passed` reported them, included)."""
        i, n = max(self._head, self._scan), self._n
        open_ = np.flatnonzero(self._state[i:n] != _DONE)
        i = i + int(open_[0]) if open_.size else n
        self._scan = i  # DONE never becomes undone, so the scan never goes back
        if i == self._head < n:
            return None  # the first offset is still open
        nxt = int(self._off[i]) if i < n else self._end
        return nxt if nxt > self._committed else None

    def due_retries(self, now_ms: int) -> list[int]:
        """Every failed offset whose retry is due, in offset order."""
        return sorted(o for o, t in self._failed.items() if t <= now_ms)

    def next_retry_ms(self) -> int | None:
        return min(self._failed.values()) if self._failed else None

    def in_flight_offsets(self) -> tuple[I64, I64, I64]:
        """(offsets, attempts, emit times) of the PENDING offsets, in offset order."""
        h, n = self._head, self._n
        sel = h + np.flatnonzero(self._state[h:n] == _PENDING)
        return self._off[sel], self._fails[sel].astype(np.int64), self._stamp[sel]

    def oldest_in_flight_ms(self) -> int | None:
        h, n = self._head, self._n
        stamps = self._stamp[h:n][self._state[h:n] == _PENDING]
        return int(stamps.min()) if stamps.size else None

    def is_in_flight(self, offset: int, attempt: int) -> bool:
        """Whether ``offset`` is PENDING in delivery ``attempt`` (mod 256, as root ids carry it)."""
        p = self._pos(offset)
        return (p is not None and self._state[p] == _PENDING
                and int(self._fails[p]) & ATTEMPT_MASK == attempt & ATTEMPT_MASK)

    # ----- effects -------------------------------------------------------

    def emitted(self, offset: int, now_ms: int = 0, payload: Any = None) -> None:
        if offset < self._committed:
            raise OffsetError(f"offset {offset} is below the committed offset {self._committed}")
        if offset >= self._end:
            self.emitted_new([offset], now_ms, [payload])
            return
        p = self._pos(offset)
        if p is None or self._state[p] != _FAILED:
            state = self.state(offset).value
            raise OffsetError(f"offset {offset} is {state}; only a failed offset is re-emitted")
        self._state[p] = _PENDING
        self._stamp[p] = now_ms
        self._in_flight += 1
        del self._failed[offset]

    def emitted_new(self, offsets: Sequence[int], now_ms: int = 0,
                    payloads: Sequence[Any] | None = None) -> None:
        """Many new offsets at once (increasing, all past :attr:`fetched_end`)."""
        k = len(offsets)
        if not k:
            return
        if offsets[0] < max(self._end, self._committed):
            raise OffsetError(f"offset {offsets[0]} is not new (emitted up to {self._end - 1})")
        self._reserve(k)
        a, b = self._n, self._n + k
        self._off[a:b] = offsets
        self._state[a:b] = _PENDING
        self._fails[a:b] = 0
        self._stamp[a:b] = now_ms
        self._payload[a:b] = None if payloads is None else np.fromiter(payloads, object, k)
        self._n = b
        self._open += k
        self._in_flight += k
        self._end = int(offsets[-1]) + 1

    def passed(self, position: int) -> None:
        """The reader's position is ``position`` with every record before it handed to
        :meth:`emitted_new`: the offsets between the last record and it hold none
        (transaction markers, records compacted away), so a commit may pass them."""
        if position > self._end:
            self._end = position

    def acked(self, offset: int) -> bool:
        """The tree of ``offset`` completed (or it was dead-lettered). False if stale."""
        p = self._pos(offset)
        if p is None or self._state[p] not in (_PENDING, _DEAD_LETTERING):
            return False
        self._done(np.array([p], np.int64))
        return True

    def acked_many(self, offsets: Sequence[int] | I64) -> int:
        """:meth:`acked` for many offsets (stale ones ignored); how many were acked."""
        pos = self._positions(np.asarray(offsets, np.int64))
        pos = np.unique(pos[pos >= 0])
        st = self._state[pos]
        pos = pos[(st == _PENDING) | (st == _DEAD_LETTERING)]
        self._done(pos)
        return int(pos.size)

    def settle_acks(self, offsets: I64, attempts: I64, now_ms: int) -> I64:
        """Acks of trees (offset, attempt): the in-flight ones are done; returns their
        complete latencies in ms (stale or duplicate acks are left out)."""
        pos = self._matching(offsets, attempts)
        lat: I64 = now_ms - self._stamp[pos]
        self._done(pos)
        return lat

    def reset_timeouts(self, offsets: I64, attempts: I64, now_ms: int) -> int:
        """Trees whose timeout was reset: their clock restarts now; how many matched."""
        pos = self._matching(offsets, attempts)
        self._stamp[pos] = now_ms
        return int(pos.size)

    def failed(self, offset: int, now_ms: int) -> Retry | GiveUp | None:
        """The tree of ``offset`` failed: schedule a retry or say to dead-letter it.

        None for a stale result (the offset is not pending).
        """
        p = self._pos(offset)
        if p is None or self._state[p] != _PENDING:
            return None
        self._fails[p] += 1
        self._in_flight -= 1
        failures = int(self._fails[p])
        if self.retry.exhausted(failures):
            self._state[p] = _DEAD_LETTERING
            return GiveUp(offset, failures)
        self._state[p] = _FAILED
        due = now_ms + self.retry.delay_ms(failures)
        self._failed[offset] = due
        return Retry(offset, due, failures)

    def give_up(self, offset: int) -> GiveUp:
        """A pending offset that will never succeed (e.g. undecodable): dead-letter it now."""
        p = self._pos(offset)
        if p is None or self._state[p] != _PENDING:
            state = self.state(offset).value
            raise OffsetError(f"offset {offset} is {state}; only a pending one is given up")
        self._state[p] = _DEAD_LETTERING
        self._in_flight -= 1
        return GiveUp(offset, int(self._fails[p]))

    def committed(self, offset: int) -> None:
        """Kafka confirmed a commit of ``offset``: forget everything below it."""
        if offset <= self._committed:
            return
        if offset > self._end:
            raise OffsetError(f"commit {offset} is past the end of what was emitted ({self._end})")
        h, n = self._head, self._n
        upto = h + int(np.searchsorted(self._off[h:n], offset))
        open_ = np.flatnonzero(self._state[h:upto] != _DONE)
        if open_.size:
            raise OffsetError(f"commit {offset} passes offset {int(self._off[h + open_[0]])}, "
                              "which is not done")
        self._head = upto
        self._committed = offset
        if self._head > 1024 and self._head * 2 > self._n:
            self._compact()

    # ----- the table -----------------------------------------------------

    def _pos(self, offset: int) -> int | None:
        h, n = self._head, self._n
        if h == n:
            return None
        first, last = int(self._off[h]), int(self._off[n - 1])
        if not first <= offset <= last:
            return None
        if last - first == n - 1 - h:  # no gaps: arithmetic
            return h + offset - first
        p = h + int(np.searchsorted(self._off[h:n], offset))
        return p if self._off[p] == offset else None

    def _positions(self, offsets: I64) -> I64:
        """Positions of many offsets; -1 where not in the window."""
        h, n = self._head, self._n
        out = np.full(offsets.size, -1, np.int64)
        if h == n or not offsets.size:
            return out
        first, last = int(self._off[h]), int(self._off[n - 1])
        inside = (offsets >= first) & (offsets <= last)
        if last - first == n - 1 - h:
            out[inside] = h + offsets[inside] - first
            return out
        p = h + np.searchsorted(self._off[h:n], offsets[inside])
        found = self._off[np.minimum(p, n - 1)] == offsets[inside]
        out[np.flatnonzero(inside)[found]] = p[found]
        return out

    def _matching(self, offsets: I64, attempts: I64) -> I64:
        """Unique positions of in-flight offsets whose attempt matches."""
        pos = self._positions(offsets)
        ok = pos >= 0
        pos, att = pos[ok], attempts[ok]
        ok = (self._state[pos] == _PENDING) & (
            (self._fails[pos].astype(np.int64) & ATTEMPT_MASK) == (att & ATTEMPT_MASK))
        return np.unique(pos[ok])

    def _done(self, pos: I64) -> None:
        if not pos.size:
            return
        self._in_flight -= int(np.count_nonzero(self._state[pos] == _PENDING))
        self._open -= int(pos.size)
        self._state[pos] = _DONE
        self._payload[pos] = None  # let the message go now, not at the next commit

    def _reserve(self, k: int) -> None:
        need = self._n + k
        cap = self._off.size
        if need <= cap:
            return
        if self._head and need - self._head <= cap // 2:
            self._compact()
            return
        size = max(cap * 2, need)
        for name in ("_off", "_state", "_fails", "_stamp", "_payload"):
            old = getattr(self, name)
            new = np.full(size, None, object) if old.dtype == object else np.zeros(size, old.dtype)
            new[: self._n] = old[: self._n]
            setattr(self, name, new)

    def _compact(self) -> None:
        h, n = self._head, self._n
        for arr in (self._off, self._state, self._fails, self._stamp, self._payload):
            arr[: n - h] = arr[h:n]
        self._payload[n - h:n] = None  # the moved ones' old places: let them go
        self._scan = max(0, self._scan - h)
        self._n, self._head = n - h, 0
