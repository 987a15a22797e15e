"""Which offsets of one source partition may be committed (Storm's ``OffsetManager``).

Each emitted offset is PENDING until its tree is acked (DONE) or failed. A
failed one waits for its retry (FAILED, with a due time) or, past the retry
limit, is handed to the caller to dead-letter, and is DONE once that is
confirmed. The commit point is the contiguous DONE prefix; offsets never
emitted inside the window (compaction gaps) are skipped, as Storm does. A
commit is applied only after Kafka confirmed it (:meth:`committed`).

Offsets arrive from Kafka in increasing order, so the emitted offsets are an
append-only list and finding the commit point is amortized O(1).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from squall.errors import OffsetError
from squall.retry import RetrySchedule


class State(Enum):
    PENDING = "pending"
    FAILED = "failed"
    DEAD_LETTERING = "dead_lettering"
    DONE = "done"


@dataclass(slots=True)
class _Entry:
    state: State
    failures: int = 0
    due_ms: int = 0


@dataclass(frozen=True, slots=True)
class Retry:
    """Replay the offset at ``due_ms``; this will be delivery ``failures + 1``."""

    offset: int
    due_ms: int
    failures: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Retries are exhausted: dead-letter the message, then call :meth:`OffsetManager.acked`."""

    offset: int
    failures: int


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
        self._order: list[int] = []  # emitted offsets >= committed, increasing
        self._head = 0  # _order[:_head] is below the commit point
        self._scan = 0  # memo: _order[_head:_scan] is DONE
        # Offsets not DONE; only those that failed at least once have an entry.
        self._pending: set[int] = set()
        self._entries: dict[int, _Entry] = {}
        self._failed: dict[int, int] = {}  # FAILED offset -> due time

    # ----- queries -------------------------------------------------------

    @property
    def committed_offset(self) -> int:
        return self._committed

    @property
    def fetched_end(self) -> int:
        """One past the highest offset emitted: where reading goes on after retries."""
        return self._end

    def state(self, offset: int) -> State:
        if offset in self._pending:
            e = self._entries.get(offset)
            return e.state if e is not None else State.PENDING
        if offset < self._end:
            return State.DONE
        raise OffsetError(f"offset {offset} was never emitted (emitted up to {self._end - 1})")

    def failures(self, offset: int) -> int:
        e = self._entries.get(offset)
        return e.failures if e else 0

    @property
    def num_pending(self) -> int:
        """Offsets emitted and not yet done (pending, failed or being dead-lettered)."""
        return len(self._pending)

    @property
    def num_uncommitted(self) -> int:
        return len(self._order) - self._head

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
        """The offset to commit (next to read), if it is past the committed one."""
        order, i = self._order, max(self._head, self._scan)
        pending = self._pending
        while i < len(order) and order[i] not in pending:
            i += 1
        self._scan = i  # DONE never becomes undone, so the scan never goes back
        if i == self._head:
            return None
        nxt = order[i] if i < len(order) else order[-1] + 1
        return nxt if nxt > self._committed else None

    def retry_due(self, now_ms: int) -> int | None:
        """The earliest failed offset whose retry is due: seek there."""
        due = [o for o, t in self._failed.items() if t <= now_ms]
        return min(due) if due else None

    def next_retry_ms(self) -> int | None:
        return min(self._failed.values()) if self._failed else None

    # ----- effects -------------------------------------------------------

    def emitted(self, offset: int) -> None:
        if offset < self._committed:
            raise OffsetError(f"offset {offset} is below the committed offset {self._committed}")
        if offset >= self._end:
            self._order.append(offset)
            self._pending.add(offset)
            self._end = offset + 1
            return
        e = self._entries.get(offset)
        if e is None or e.state is not State.FAILED:
            state = self.state(offset).value
            raise OffsetError(f"offset {offset} is {state}; only a failed offset is re-emitted")
        e.state = State.PENDING
        del self._failed[offset]

    def emitted_new(self, offsets: list[int]) -> None:
        """Many new offsets at once (increasing, all past :attr:`fetched_end`)."""
        if not offsets:
            return
        if offsets[0] < max(self._end, self._committed):
            raise OffsetError(f"offset {offsets[0]} is not new (emitted up to {self._end - 1})")
        self._order.extend(offsets)
        self._pending.update(offsets)
        self._end = offsets[-1] + 1

    def acked(self, offset: int) -> bool:
        """The tree of ``offset`` completed (or it was dead-lettered). False if stale."""
        if offset not in self._pending:
            return False
        e = self._entries.get(offset)
        if e is not None:
            if e.state is State.FAILED:
                return False
            del self._entries[offset]
        self._pending.discard(offset)
        return True

    def acked_many(self, offsets: list[int]) -> None:
        """:meth:`acked` for many offsets (stale ones ignored)."""
        if not self._entries:  # nothing ever failed here: a set difference
            self._pending.difference_update(offsets)
            return
        for o in offsets:
            self.acked(o)

    def failed(self, offset: int, now_ms: int) -> Retry | DeadLetter | None:
        """The tree of ``offset`` failed: schedule a retry or say to dead-letter it.

        None for a stale result (the offset is not pending).
        """
        if offset not in self._pending:
            return None
        e = self._entries.get(offset)
        if e is None:
            e = self._entries[offset] = _Entry(State.PENDING)
        elif e.state is not State.PENDING:
            return None
        e.failures += 1
        if self.retry.exhausted(e.failures):
            e.state = State.DEAD_LETTERING
            return DeadLetter(offset, e.failures)
        e.state = State.FAILED
        e.due_ms = now_ms + self.retry.delay_ms(e.failures)
        self._failed[offset] = e.due_ms
        return Retry(offset, e.due_ms, e.failures)

    def give_up(self, offset: int) -> DeadLetter:
        """A pending offset that will never succeed (e.g. undecodable): dead-letter it now."""
        if self.state(offset) is not State.PENDING:
            raise OffsetError(f"offset {offset} is not pending; only a pending one is given up")
        e = self._entries.setdefault(offset, _Entry(State.PENDING))
        e.state = State.DEAD_LETTERING
        return DeadLetter(offset, e.failures)

    def committed(self, offset: int) -> None:
        """Kafka confirmed a commit of ``offset``: forget everything below it."""
        if offset <= self._committed:
            return
        if offset > self._end:
            raise OffsetError(f"commit {offset} is past the end of what was emitted ({self._end})")
        order, head = self._order, self._head
        while head < len(order) and order[head] < offset:
            if order[head] in self._pending:
                raise OffsetError(f"commit {offset} passes offset {order[head]}, which is not done")
            head += 1
        self._head = head
        self._committed = offset
        if self._head > 1024 and self._head * 2 > len(order):
            del order[: self._head]
            self._scan = max(0, self._scan - self._head)
            self._head = 0
