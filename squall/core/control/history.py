"""A topology's numbers over time, for the topology page's charts: rates and complete
latency between the API's snapshots of its counters, and the lag as it was read.

The counters' running totals come from :class:`squall.core.control.rolling.RollingTotals`
(restarts already taken out), keyed ``(process, component, statistic)``; the complete
latency travels as its histogram's cumulative buckets, statistics ``latency_le_<bound>``.
Pure: snapshots and times are passed in.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The spouts' counters the charts show, as rates per second.
RATES = ("emitted", "acked", "failed", "replayed", "dead_lettered")
#: A bucket of the spouts' complete latency histogram, as a statistic.
LE = "latency_le_"
#: (keep a point at most this often, for this long): as the rolling windows keep theirs.
LEVELS = ((10_000, 600_000), (60_000, 10_800_000), (300_000, 86_400_000))

Key = tuple[str, str, str]


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile of cumulative ``buckets`` (upper bound -> count), interpolated
    within a bucket as Prometheus' ``histogram_quantile`` does; None with no observation."""
    total = buckets.get(math.inf, 0.0)
    if total <= 0:
        return None
    rank = q * total
    prev_b, prev_c = 0.0, 0.0
    for b in sorted(buckets):
        c = buckets[b]
        if c >= rank:
            if math.isinf(b):
                return prev_b
            return prev_b + (b - prev_b) * ((rank - prev_c) / (c - prev_c) if c > prev_c
                                            else 0.0)
        prev_b, prev_c = b, c
    return prev_b


def rate_points(snapshots: Iterable[tuple[int, Mapping[Key, float]]], spouts: set[str]
                ) -> list[dict[str, Any]]:
    """One point per pair of consecutive snapshots, at the later one: the spouts' rates
    (per second) and the complete latency's p50 and p99 (ms; None without a tree
    completed in between)."""
    out: list[dict[str, Any]] = []
    prev: tuple[int, dict[str, float]] | None = None
    for at_ms, totals in snapshots:
        sums: dict[str, float] = {}
        for (_, comp, stat), v in totals.items():
            if comp in spouts and (stat in RATES or stat.startswith(LE)):
                sums[stat] = sums.get(stat, 0.0) + v
        if prev is not None and at_ms > prev[0]:
            dt = (at_ms - prev[0]) / 1000
            point: dict[str, Any] = {"t_ms": at_ms}
            for stat in RATES:
                point[f"{stat}_per_s"] = round(max(0.0, sums.get(stat, 0.0)
                                                   - prev[1].get(stat, 0.0)) / dt, 3)
            buckets = {float(k.removeprefix(LE)): max(0.0, v - prev[1].get(k, 0.0))
                       for k, v in sums.items() if k.startswith(LE)}
            for q, name in ((0.5, "latency_p50_ms"), (0.99, "latency_p99_ms")):
                got = histogram_quantile(q, buckets)
                point[name] = None if got is None else round(got * 1000, 1)
            out.append(point)
        prev = (at_ms, sums)
    return out


@dataclass(frozen=True)
class LagPoint:
    t_ms: int
    messages: int
    #: the oldest waiting message's age, over the topology's partitions
    seconds: float


class GaugeHistory:
    """Readings of a gauge kept at a resolution that coarsens with age (:data:`LEVELS`)."""

    def __init__(self) -> None:
        self._levels: list[deque[LagPoint]] = [deque() for _ in LEVELS]

    def add(self, point: LagPoint) -> None:
        for (every_ms, keep_ms), level in zip(LEVELS, self._levels, strict=True):
            if not level or point.t_ms - level[-1].t_ms >= every_ms:
                level.append(point)
            while level and level[0].t_ms < point.t_ms - keep_ms:
                level.popleft()

    def over(self, now_ms: int, seconds: int) -> list[LagPoint]:
        """The readings of the last ``seconds``, oldest first, at the finest resolution kept
        that long."""
        start = now_ms - seconds * 1000
        for (_, keep_ms), level in zip(LEVELS, self._levels, strict=True):
            if keep_ms >= seconds * 1000:
                return [p for p in level if p.t_ms >= start]
        return [p for p in self._levels[-1] if p.t_ms >= start]
