"""How far the bolts have processed, as a time: the clock message timeouts run on.

Storm times a tree out T after its spout emitted it, however long its tuples
waited in queues. When the bolts are slow - cold, restarted and catching up,
offered more than they can take - healthy trees time out, their replays queue
behind them, and messages that were only waiting run out of retries: a replay
storm. Squall's timeouts count the time a tree's tuples were *available to the
bolts and not acked*, not the time they were queued:

- the bolts job observes the end of every edge partition it reads, now and
  then (:meth:`Processed.observe`), and learns what each of its queries has
  processed (:meth:`Processed.processed`);
- its watermark ``W`` is the latest observation time ``t`` such that every
  query had processed everything its edges held at ``t``: every tuple written
  before ``W`` has been executed (and acked, or failed, or held on purpose);
- the acker's timeout clock is ``min(its own clock, W)``
  (:class:`TimeoutClock`), so a tree emitted at ``t0`` times out only once
  ``W >= t0 + T``: every tuple of it written within T of ``t0`` was executed
  and the tree is still not complete. A bolt that drops a tuple still times
  out after T; a queue never does, and a stopped bolts job stops the clock.

A tuple dropped in transit cannot happen here (edges are Kafka topics and a
micro-batch is replayed from Spark's checkpoint), which is why queue time can
be left out. Pure: times and offsets are passed in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping


class Processed:
    """The watermark of a bolts job from observed edge ends and its queries' progress."""

    def __init__(self, queries: Mapping[str, Iterable[str]]) -> None:
        """``queries``: query name -> the edge partitions it reads (``"topic:partition"``)."""
        self._keys = {q: tuple(ks) for q, ks in queries.items()}
        self._done: dict[str, dict[str, int]] = {q: {} for q in self._keys}
        self._known: set[str] = set()  # queries whose processed offsets are known
        # (time, ends) observations, oldest first; the first one is always covered.
        self._seen: deque[tuple[int, dict[str, int]]] = deque()
        self._covered: dict[str, int | None] = {q: None for q in self._keys}

    def observe(self, now_ms: int, ends: Mapping[str, int]) -> None:
        """The edges' ends (high watermarks) as seen at ``now_ms``."""
        if self._seen and ends == self._seen[-1][1]:
            # Nothing was written since: the newest observation stands for now as well.
            self._seen[-1] = (max(now_ms, self._seen[-1][0]), self._seen[-1][1])
        else:
            self._seen.append((now_ms, dict(ends)))
        self._advance()

    def processed(self, query: str, offsets: Mapping[str, int]) -> None:
        """``query`` has processed its edges up to ``offsets`` (exclusive ends)."""
        done = self._done[query]
        for k, v in offsets.items():
            if v > done.get(k, -1):
                done[k] = v
        self._known.add(query)
        self._advance()

    def watermark(self) -> int | None:
        """Every tuple written before this time has been processed; None until known."""
        if len(self._known) < len(self._keys) or not self._keys:
            return None
        times = list(self._covered.values())
        return None if any(t is None for t in times) else min(t for t in times if t is not None)

    def _advance(self) -> None:
        for q, keys in self._keys.items():
            if q not in self._known:
                continue
            done = self._done[q]
            for t, ends in self._seen:
                if all(ends.get(k, 0) <= done.get(k, 0) for k in keys):
                    prev = self._covered[q]
                    self._covered[q] = t if prev is None else max(prev, t)
                else:
                    break  # ends only grow: a later observation is not covered either
        # Observations every query has passed are not needed again, but the newest of them
        # (it is the watermark until the next one is covered).
        if all(t is not None for t in self._covered.values()):
            low = min(t for t in self._covered.values() if t is not None)
            while len(self._seen) > 1 and self._seen[1][0] <= low:
                self._seen.popleft()


class TimeoutClock:
    """The acker's clock for message timeouts: its own, held back to the bolts' watermark.

    ``gated`` False: the acker's own clock alone (Storm's behaviour; topologies
    whose bolts do not report progress, tests of the acker alone).
    """

    def __init__(self, gated: bool = True) -> None:
        self.gated = gated
        self._marks: dict[str, int] = {}

    def mark(self, job: str, watermark_ms: int) -> None:
        """A bolts job's watermark (they only move forward)."""
        if watermark_ms > self._marks.get(job, -1):
            self._marks[job] = watermark_ms

    @property
    def bolts_ms(self) -> int | None:
        return min(self._marks.values()) if self._marks else None

    def now(self, own_ms: int) -> int | None:
        """The time timeouts are judged at; None: not at all yet (no bolts job has said
        how far it got, e.g. all of them still starting)."""
        if not self.gated:
            return own_ms
        bolts = self.bolts_ms
        return None if bolts is None else min(own_ms, bolts)


class AckerClocks:
    """A spout task's view of its ackers' timeout clocks, as each acker task stamps its
    results: the backstop judges trees at the earliest of them, once every acker task has
    told it (an acker that is down cannot take replays anyway)."""

    def __init__(self, ackers: int) -> None:
        self.ackers = ackers
        self._by_acker: dict[bytes, int] = {}

    def stamp(self, acker: bytes, clock_ms: int) -> None:
        self._by_acker[acker] = max(clock_ms, self._by_acker.get(acker, clock_ms))

    def now(self) -> int | None:
        if not self._by_acker or len(self._by_acker) < self.ackers:
            return None
        return min(self._by_acker.values())
