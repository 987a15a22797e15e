"""A windowed bolt task's windows (Storm's ``WindowManager``): which tuples each window
holds, when it closes, and when each tuple may be acked. Pure; time passed in.

Every tuple gets a position: its arrival number (count window), its timestamp (event
time) or its arrival time (processing time). Windows are the ranges ``[end - length,
end)`` with ``end`` a multiple of the slide; one closes once the clock reaches its end:
the tuples added so far (count), the watermark (event time) or now (processing time).

Rules:
- a window that holds no tuple is not fired;
- a tuple is *new* in the first window that holds it, is acked right after the last one
  does (it is in no later window), and is handed once more as *expired* to the next
  window fired, then forgotten;
- event time: the watermark is the smallest, over the bolt's input streams, of the
  newest timestamp seen less the lag; it waits until every input stream has sent a tuple
  and never goes back. A tuple whose timestamp is below the watermark is *late*: its
  windows have closed (Storm's rule);
- a tuple failed while in a window leaves it (its message is replayed); a tuple that
  comes again (its source message replayed: the same place in the same tree) replaces
  the copy kept, whose tree has failed, so the window holds it once;
- the trees of the tuples kept have their timeouts reset every third of the message
  timeout: a window may hold a tuple longer than the timeout (a long window, a count
  window or a watermark waiting for input) without its message being replayed.

Everything lives in the task's :class:`KeyValueState`, one key per tuple and one for the
windows' progress, so only what changed is written after a micro-batch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from squall.core.bolt_api.state import KeyValueState
from squall.core.errors import FieldError
from squall.core.reliability.tuples import Tuple
from squall.core.topology.windows import WindowSpec

_KEY = "__window__"
_META = (_KEY,)


@dataclass(frozen=True)
class Progress:
    """The windows' progress, stored under one key."""

    #: tuples added so far (the next one's arrival number)
    added: int = 0
    #: the end of the next window to close (None: no tuple waits)
    next_end: int | None = None
    #: event time: the watermark, and the newest timestamp per input stream
    watermark: int | None = None
    newest: tuple[tuple[str, int], ...] = ()
    #: tuples at positions below it are acked (kept only to be handed as expired)
    acked_below: int | None = None
    #: when the trees of the tuples kept last had their timeouts reset
    refreshed_ms: int | None = None


@dataclass
class Fired:
    """One window to execute, and what to do with its tuples once it has run."""

    tuples: list[Tuple]
    new: list[Tuple]
    expired: list[Tuple]
    start: int
    end: int
    #: the window's tuples that no later window holds: ack them after it ran
    done: list[Tuple] = field(default_factory=list)
    #: how many children each of its tuples had before it ran (what to store again)
    children: dict[int, int] = field(default_factory=dict)


class WindowManager:
    """One task's windows, over its state."""

    def __init__(self, spec: WindowSpec, state: KeyValueState,
                 streams: Sequence[str]) -> None:
        """``streams``: the bolt's input streams as ``component/stream`` (event time waits
        for each)."""
        self.spec = spec
        self.state = state
        self.streams = tuple(sorted(set(streams)))
        self._copies: dict[tuple[Any, ...], Any] | None = None

    def begin(self) -> None:
        """Before a micro-batch's tuples: index the tuples kept by their place in their
        message's tree (state another worker wrote may have come in since)."""
        self._copies = {_copy_key(t): key for key, (_, t) in self._items()
                        if t.origin is not None}

    @property
    def progress(self) -> Progress:
        got = self.state.get(_META)
        return got if isinstance(got, Progress) else Progress()

    def held(self) -> list[tuple[int, int, Tuple]]:
        """The tuples kept, as (position, arrival number, tuple), oldest position first."""
        out = [(v[0], k[1], v[1]) for k, v in self.state.items()
               if isinstance(k, tuple) and len(k) == 2 and k[0] == _KEY]
        out.sort(key=lambda h: (h[0], h[1]))
        return out

    def position(self, t: Tuple, now_ms: int) -> int:
        """Where ``t`` goes (event time: its timestamp, or a FieldError saying what is
        wrong with it)."""
        if self.spec.by_count:
            return self.progress.added
        if self.spec.timestamp_field is None:
            return now_ms
        v = t[self.spec.timestamp_field]
        if isinstance(v, bool) or not isinstance(v, int | float) or \
                (isinstance(v, float) and not math.isfinite(v)):
            raise FieldError(f"timestamp field {self.spec.timestamp_field!r} is {v!r}: "
                             "milliseconds since the epoch, a number, are needed")
        return int(v)

    def add(self, t: Tuple, now_ms: int) -> bool:
        """Keep ``t`` for its windows; False if it is late (not kept)."""
        p = self.progress
        pos = self.position(t, now_ms)
        if self.spec.event_time:
            if p.watermark is not None and pos < p.watermark:
                return False
            newest = dict(p.newest)
            stream = f"{t.source}/{t.stream}"
            newest[stream] = max(newest.get(stream, pos), pos)
            p = replace(p, newest=tuple(sorted(newest.items())))
        if t.origin is not None and self._copies is not None:
            copy = self._copies.get(_copy_key(t))
            if copy is not None and copy in self.state:
                del self.state[copy]  # its tree failed: its message is back
            self._copies[_copy_key(t)] = (_KEY, p.added)
        self.state[(_KEY, p.added)] = (pos, t)
        first = self._aligned_above(pos)
        self.state[_META] = replace(p, added=p.added + 1, next_end=first
                                    if p.next_end is None else min(p.next_end, first))
        return True

    def clock(self, now_ms: int) -> int | None:
        """How far windows may close: event time advances the watermark first."""
        p = self.progress
        if self.spec.by_count:
            return p.added
        if not self.spec.event_time:
            return now_ms
        newest = dict(p.newest)
        if any(s not in newest for s in self.streams) or not newest:
            return p.watermark
        mark = min(newest.values()) - self.spec.lag_ms
        if p.watermark is None or mark > p.watermark:
            self.state[_META] = replace(p, watermark=mark)
            return mark
        return p.watermark

    def fire(self, now_ms: int) -> Iterator[Fired]:
        """The windows that close now, in order. Run each before taking the next, then
        call :meth:`finish` with it: a tuple failed meanwhile is left out of later ones."""
        clock = self.clock(now_ms)
        length, slide = self.spec.length, self.spec.slide
        while True:
            p = self.progress
            if clock is None or p.next_end is None or clock < p.next_end:
                return
            end = p.next_end
            start = end - length
            held = self.held()
            # the next window that holds a tuple still kept for one
            keep = end + slide - length
            later = [pos for pos, _, _ in held if pos >= keep]
            self.state[_META] = replace(p, next_end=max(end + slide, self._aligned_above(
                min(later))) if later else None)
            window = [(pos, t) for pos, _, t in held if start <= pos < end and not t.settled]
            if not window:
                continue
            expired = [t for pos, _, t in held if _acked(pos, p)]
            for t in expired:
                t._settled = True  # acked after an earlier window: no anchoring to it
            yield Fired([t for _, t in window], [t for pos, t in window if pos >= end - slide],
                        expired, start, end, done=[t for pos, t in window if pos < keep],
                        children={id(t): t._children for _, t in window})

    def finish(self, fired: Fired) -> None:
        """After ``fired`` ran and its done tuples were acked: forget the expired ones and
        those failed, and keep what the window's execute changed in the others (their
        count of children, for the lineage of their next)."""
        p = self.progress
        below = fired.end + self.spec.slide - self.spec.length
        p = replace(p, acked_below=below if p.acked_below is None else max(p.acked_below, below))
        self.state[_META] = p
        expired = {id(t) for t in fired.expired}
        before = fired.children
        for key, (pos, t) in list(self._items()):
            if id(t) in expired or (t.settled and not _acked(pos, p)):
                del self.state[key]
            elif not t.settled and before.get(id(t), t._children) != t._children:
                self.state[key] = (pos, t)

    def refresh(self, now_ms: int, every_ms: int) -> list[Tuple]:
        """The tuples kept whose trees' timeouts are due a reset (all of them, every
        ``every_ms``)."""
        p = self.progress
        if p.refreshed_ms is not None and now_ms - p.refreshed_ms < every_ms:
            return []
        self.state[_META] = replace(p, refreshed_ms=now_ms)
        if p.refreshed_ms is None:
            return []  # the tuples kept came in since
        return [t for _, (pos, t) in self._items() if not t.settled and not _acked(pos, p)]

    def drop(self, tuples: Sequence[Tuple]) -> None:
        """Forget ``tuples`` (failed)."""
        gone = {id(t) for t in tuples}
        for key, (_, t) in list(self._items()):
            if id(t) in gone:
                del self.state[key]

    def _items(self) -> Iterator[tuple[Any, tuple[int, Tuple]]]:
        for k, v in self.state.items():
            if isinstance(k, tuple) and len(k) == 2 and k[0] == _KEY:
                yield k, v

    def _aligned_above(self, pos: int) -> int:
        """The first window end past ``pos``."""
        return (pos // self.spec.slide + 1) * self.spec.slide


def _copy_key(t: Tuple) -> tuple[Any, ...]:
    return t.origin, t.path, t.source, t.stream


def _acked(pos: int, p: Progress) -> bool:
    return p.acked_below is not None and pos < p.acked_below
