"""The charts' numbers: rates and latency quantiles between snapshots of running totals,
the lag kept at a resolution that coarsens with age, and the windows' series."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.history import (
    GaugeHistory,
    LagPoint,
    histogram_quantile,
    rate_points,
)
from squall.core.control.rolling import RollingTotals


def test_histogram_quantile_interpolates_as_prometheus_does() -> None:
    buckets = {0.1: 50.0, 0.2: 90.0, 0.4: 100.0, math.inf: 100.0}
    assert histogram_quantile(0.5, buckets) == 0.1
    assert abs((histogram_quantile(0.7, buckets) or 0) - 0.15) < 1e-9
    assert abs((histogram_quantile(0.99, buckets) or 0) - 0.38) < 1e-9
    assert histogram_quantile(0.5, {math.inf: 0.0}) is None
    assert histogram_quantile(0.99, {0.1: 1.0, math.inf: 5.0}) == 0.1  # past the last bound


def test_rates_and_latency_between_snapshots_for_the_spouts_only() -> None:
    def snap(at: int, acked: float, le1: float, le2: float) -> tuple[int, dict[
            tuple[str, str, str], float]]:
        return at, {("u1", "src", "acked"): acked, ("u1", "src", "latency_le_0.1"): le1,
                    ("u1", "src", "latency_le_+Inf"): le2, ("u2", "split", "acked"): 1e9}

    points = rate_points([snap(0, 0, 0, 0), snap(10_000, 100, 99, 100),
                          snap(20_000, 100, 99, 100)], {"src"})
    assert [p["t_ms"] for p in points] == [10_000, 20_000]
    assert points[0]["acked_per_s"] == 10.0 and points[0]["failed_per_s"] == 0.0
    assert points[0]["latency_p50_ms"] == 50.5 and points[0]["latency_p99_ms"] == 100.0
    # Nothing completed in the second interval: no latency, not a zero.
    assert points[1]["acked_per_s"] == 0 and points[1]["latency_p99_ms"] is None


@given(st.lists(st.integers(0, 5_000), min_size=1, max_size=400))
def test_the_lag_history_keeps_each_window_at_its_resolution(steps: list[int]) -> None:
    h, t = GaugeHistory(), 0
    for i, dt in enumerate(steps):
        t += dt
        h.add(LagPoint(t, i, float(i)))
    for seconds, every_ms in ((600, 10_000), (10_800, 60_000), (86_400, 300_000)):
        got = h.over(t, seconds)
        assert all(p.t_ms >= t - seconds * 1000 for p in got)
        assert all(b.t_ms - a.t_ms >= every_ms for a, b in itertools.pairwise(got))
        assert [p.t_ms for p in got] == sorted(p.t_ms for p in got)
    assert h.over(t, 600)[0].t_ms == 0 or t > 0  # the first reading is kept


def test_rolling_series_are_the_windows_snapshots_at_their_resolution() -> None:
    r = RollingTotals[str](baseline_first=False)
    for i in range(0, 4 * 3600, 2):  # a scrape every 2 s for four hours
        r.observe(i * 1000, [("s", "acked", float(i))])
    now = (4 * 3600 - 2) * 1000
    ten = r.series(now, 600)
    assert 55 <= len(ten) <= 62 and ten[-1][0] == now
    assert ten[-1][1]["acked"] == 4 * 3600 - 2
    assert all(b[0] - a[0] >= 2_000 for a, b in itertools.pairwise(ten))
    three = r.series(now, 10_800)
    assert 170 <= len(three) <= 182 and three[0][0] >= now - 10_800_000
    day = r.series(now, 86_400)
    assert len(day) == 4 * 12 + 1 and day[0][0] == 0 and day[-1][0] == now
