"""Storm UI's rolling windows (the last 10 minutes, 3 hours, 1 day) over counters that
restart with their processes.

Squall's services export cumulative counters (Prometheus's model); a worker that restarts
starts them at zero again. Storm's UI shows each statistic over the last ``600``,
``10800`` and ``86400`` seconds besides ``:all-time``. :class:`RollingTotals` turns scrapes
of the counters into windows:

- each series (one process's counter: its endpoint, name and labels) is followed apart;
  a value below the series' last is a restart, and counts from zero (Prometheus's
  ``increase()`` rule), so a restart neither loses nor subtracts what was counted (one
  that counts past its old value between two scrapes, seconds apart, is taken for the
  old process: its count before the restart is lost to the windows);
- every series' increase is added to its group's running total (a group is whatever the
  caller sums over: a component's statistic, say);
- snapshots of the running totals are kept at a resolution that coarsens with age (every
  observation for 10 minutes, one a minute for 3 hours, one every 5 minutes for a day),
  so a window is the total now minus the total at the oldest snapshot inside it.

A window covers at most its length and at least what has been observed: :meth:`window`
says how many seconds it spans (a fresh API replica has seen only its own lifetime).
Pure: times are passed in, in milliseconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

#: Storm's windows, in seconds, and how they are shown.
WINDOWS: dict[str, str] = {"600": "10m 0s", "10800": "3h 0m 0s", "86400": "1d 0h 0m 0s"}
ALL_TIME = ":all-time"
ALL_TIME_PRETTY = "All time"

#: (keep a snapshot at most this often, for this long): the resolution coarsens with age.
_LEVELS = ((10_000, 600_000), (60_000, 10_800_000), (300_000, 86_400_000))


G = TypeVar("G", bound=Hashable)


@dataclass(frozen=True)
class Window(Generic[G]):
    """A window's increase per group, and the span it covers in seconds."""

    totals: Mapping[G, float]
    span_s: float

    def get(self, group: G) -> float:
        return self.totals.get(group, 0.0)


@dataclass(frozen=True)
class _Snapshot(Generic[G]):
    at_ms: int
    totals: dict[G, float]


class RollingTotals(Generic[G]):
    """Running totals per group from cumulative series, with windows over them."""

    def __init__(self, baseline_first: bool = True) -> None:
        """``baseline_first``: the series of the first observation counted before it, in no
        window known here (an API replica's first scrape); False: they are new (a topology
        first seen after that, its processes just started)."""
        self._baseline_first = baseline_first
        #: each series' last value and when it was seen
        self._last: dict[Hashable, tuple[float, int]] = {}
        self._totals: dict[G, float] = {}
        self._levels: list[deque[_Snapshot[G]]] = [deque() for _ in _LEVELS]
        self._now_ms: int | None = None

    def observe(self, now_ms: int, series: Iterable[tuple[Hashable, G, float]]) -> None:
        """One scrape at ``now_ms``: ``(series id, group, cumulative value)`` for every
        series. A series missing from a scrape keeps its last value (its process may be
        slow to answer); one that comes back lower was restarted. On the first scrape every
        series is a baseline (unless the constructor said otherwise); a series first seen
        later is a new process, all of whose count is new."""
        first = self._now_ms is None and self._baseline_first
        if self._now_ms is None and not first:
            self._snapshot(now_ms)  # nothing counted yet: the windows' start
        if self._now_ms is not None and now_ms < self._now_ms:
            now_ms = self._now_ms  # a clock step back: keep the history in order
        for sid, group, value in series:
            seen = self._last.get(sid)
            if seen is None:
                inc = 0.0 if first else value
            else:
                inc = value - seen[0] if value >= seen[0] else value
            self._last[sid] = (value, now_ms)
            if inc:
                self._totals[group] = self._totals.get(group, 0.0) + inc
        self._now_ms = now_ms
        self._snapshot(now_ms)
        if len(self._levels[-1]) == 1 or self._levels[-1][-1].at_ms == now_ms:
            # A series unseen for the longest window is a process gone for good (a
            # restarted one has its own endpoint): forgotten, or they would pile up.
            horizon = now_ms - _LEVELS[-1][1]
            for sid in [k for k, (_, at) in self._last.items() if at < horizon]:
                del self._last[sid]

    def window(self, now_ms: int, seconds: int) -> Window[G]:
        """The increase per group over the last ``seconds`` (at most), as of ``now_ms``."""
        start = now_ms - seconds * 1000
        base: _Snapshot[G] | None = None
        for level in self._levels:
            for snap in level:
                if snap.at_ms >= start and (base is None or snap.at_ms < base.at_ms):
                    base = snap
                    break  # a level is in time order: its first inside is its oldest
        if base is None:
            return Window({}, 0.0)
        out = {g: v - base.totals.get(g, 0.0) for g, v in self._totals.items()}
        return Window({g: v for g, v in out.items() if v}, max(0.0, (now_ms - base.at_ms)
                                                                / 1000))

    def series(self, now_ms: int, seconds: int) -> list[tuple[int, Mapping[G, float]]]:
        """The running totals over the last ``seconds``, oldest first, at the finest
        resolution kept that long (every 10 s over 10 minutes, every minute over 3 hours,
        every 5 minutes over a day), and the totals as of the last observation: what a chart
        of the window draws."""
        start = now_ms - seconds * 1000
        level = next((lv for (_, keep_ms), lv in zip(_LEVELS, self._levels, strict=True)
                      if keep_ms >= seconds * 1000), self._levels[-1])
        out: list[tuple[int, Mapping[G, float]]] = [(s.at_ms, s.totals) for s in level
                                                    if s.at_ms >= start]
        if self._now_ms is not None and (not out or out[-1][0] < self._now_ms):
            out.append((self._now_ms, dict(self._totals)))  # the latest, for a live chart
        return out

    def _snapshot(self, now_ms: int) -> None:
        snap = _Snapshot(now_ms, dict(self._totals))
        for (every_ms, keep_ms), level in zip(_LEVELS, self._levels, strict=True):
            if not level or now_ms - level[-1].at_ms >= every_ms:
                level.append(snap)
            while len(level) > 1 and level[1].at_ms <= now_ms - keep_ms:
                level.popleft()
