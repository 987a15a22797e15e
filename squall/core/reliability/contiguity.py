"""Reading a partition without moving past records the broker has not shown yet.

Kafka numbers a partition's records one after another, and a consumer moves past any
offset that is missing: compaction removes records, transaction markers are never
delivered. A broker may also answer a fetch with a record batch that follows one
another producer is still writing: the earlier records become visible a moment later
(the development stack's does: docs/kafka.md). A consumer that moved past them never reads them: a
skipped init or ack holds its tree until the message timeout (the soak's 60 s stalls), a
skipped source record is committed over and never processed.

So a gap is not taken at once. The reader goes back to the first missing offset and
fetches again; a gap still there ``hold_ms`` after it was first seen is taken for a real
one (compaction, markers, records the broker lost) and reported. ``hold_ms`` 0 is
Kafka's own behaviour. Pure: times are passed in.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Admitted:
    """What to do with one fetch's offsets of a partition (ascending)."""

    #: process ``offsets[start:stop]``: the records that follow on from the last one taken
    start: int
    stop: int
    #: go back to this offset and fetch again (a gap not yet held long enough), or None
    rewind_to: int | None = None
    #: gaps taken for real in this fetch: ``(first missing, first present)``
    accepted: tuple[tuple[int, int], ...] = field(default_factory=tuple)


class Contiguity(Generic[K]):
    """Per partition, the next offset to process and since when a gap before it was seen."""

    def __init__(self, hold_ms: int) -> None:
        if hold_ms < 0:
            raise ValueError(f"hold_ms must be >= 0, not {hold_ms}")
        self.hold_ms = hold_ms
        self._next: dict[K, int] = {}
        # key -> (first missing offset, first offset seen after it, when first seen)
        self._gap_seen: dict[K, tuple[int, int, int]] = {}

    def expect(self, key: K, offset: int) -> None:
        """The partition was assigned or sought to ``offset`` (< 0: not known, as Kafka's
        logical offsets: the first record fetched sets it)."""
        self._gap_seen.pop(key, None)
        if offset < 0:
            self._next.pop(key, None)
        else:
            self._next[key] = offset

    def next_offset(self, key: K) -> int | None:
        return self._next.get(key)

    def admit(self, key: K, offsets: Sequence[int], now_ms: int) -> Admitted:
        n = len(offsets)
        if not n:
            return Admitted(0, 0)
        exp = self._next.get(key, offsets[0])
        if offsets[0] == exp and offsets[-1] == exp + n - 1:  # contiguous: all of it
            self._next[key] = exp + n
            self._gap_seen.pop(key, None)
            return Admitted(0, n)
        i = 0
        while i < n and offsets[i] < exp:  # fetched before a rewind: taken already
            i += 1
        start = i
        accepted: list[tuple[int, int]] = []
        while i < n:
            o = offsets[i]
            if o == exp:
                exp += 1
                i += 1
                continue
            if o < exp:  # out of order: fetch again from what is next
                self._next[key] = exp
                return Admitted(start, i, exp, tuple(accepted))
            seen = self._gap_seen.get(key)
            if seen is None or seen[0] != exp:
                seen = self._gap_seen[key] = (exp, o, now_ms)
            if now_ms - seen[2] < self.hold_ms:
                self._next[key] = exp
                return Admitted(start, i, exp, tuple(accepted))
            accepted.append((exp, o))
            del self._gap_seen[key]
            exp = o
        self._next[key] = exp
        seen = self._gap_seen.get(key)
        if seen is not None and seen[0] < exp:  # the gap filled in
            del self._gap_seen[key]
        return Admitted(start, n, None, tuple(accepted))

    def passed(self, key: K, offset: int, now_ms: int) -> bool:
        """The reader's position is ``offset`` with no record before it (offsets without a
        record: transaction markers, compaction): True, and ``offset`` is next, once that
        gap was held as long as one seen between records."""
        exp = self._next.get(key)
        if exp is None or offset <= exp:
            return exp is None
        seen = self._gap_seen.get(key)
        if seen is None or seen[0] != exp:
            seen = self._gap_seen[key] = (exp, offset, now_ms)
        if now_ms - seen[2] < self.hold_ms:
            return False
        del self._gap_seen[key]
        self._next[key] = offset
        return True

    def overdue(self, now_ms: int) -> dict[K, tuple[int, int]]:
        """Gaps held ``hold_ms`` with nothing fetched since (a broker may answer a fetch at
        the missing offset with nothing at all, again and again): each is taken for real,
        ``{key: (first missing, first present)}``, and the reader must seek to the latter
        (a record in between that showed since is passed over: nothing better is known)."""
        out = {k: (first, present) for k, (first, present, at) in self._gap_seen.items()
               if now_ms - at >= self.hold_ms and self._next.get(k) == first}
        for k, (_, present) in out.items():
            del self._gap_seen[k]
            self._next[k] = present
        return out
