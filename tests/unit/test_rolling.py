"""Storm's rolling windows over counters that restart with their processes (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.rolling import RollingTotals

S = 1000  # ms


def test_the_first_scrape_is_a_baseline_and_later_increases_count() -> None:
    r = RollingTotals[str]()
    r.observe(0, [("p1", "emitted", 100.0)])
    assert r.window(0, 600).totals == {}
    r.observe(10 * S, [("p1", "emitted", 150.0)])
    w = r.window(10 * S, 600)
    assert w.get("emitted") == 50 and w.span_s == 10


def test_a_restart_counts_from_zero_and_a_new_process_counts_whole() -> None:
    r = RollingTotals[str]()
    r.observe(0, [("p1", "acked", 40.0)])
    r.observe(10 * S, [("p1", "acked", 70.0)])  # +30
    r.observe(20 * S, [("p1", "acked", 5.0)])  # restarted: +5, nothing subtracted
    r.observe(30 * S, [("p1", "acked", 9.0), ("p2", "acked", 12.0)])  # +4, new process +12
    assert r.window(30 * S, 600).get("acked") == 30 + 5 + 4 + 12


def test_a_topology_first_seen_later_counts_from_its_start() -> None:
    r = RollingTotals[str](baseline_first=False)
    r.observe(0, [("p1", "emitted", 25.0)])
    assert r.window(0, 600).get("emitted") == 25


def test_a_series_missing_from_a_scrape_keeps_its_count() -> None:
    r = RollingTotals[str]()
    r.observe(0, [("p1", "x", 0.0)])
    r.observe(10 * S, [])  # its endpoint did not answer
    r.observe(20 * S, [("p1", "x", 8.0)])
    assert r.window(20 * S, 600).get("x") == 8


def test_a_window_holds_only_its_last_seconds() -> None:
    r = RollingTotals[str]()
    for i in range(0, 121):  # 20 minutes, one scrape every 10 s, +1 each
        r.observe(i * 10 * S, [("p", "n", float(i))])
    now = 120 * 10 * S
    ten_min = r.window(now, 600)
    assert ten_min.get("n") == 60 and ten_min.span_s == 600
    assert r.window(now, 10800).get("n") == 120
    assert r.window(now, 10800).span_s == 1200  # no more than was observed


def test_the_resolution_coarsens_with_age_but_windows_stay_within_their_length() -> None:
    r = RollingTotals[str]()
    for i in range(0, 4 * 360 + 1):  # 4 hours, one scrape every 10 s
        r.observe(i * 10 * S, [("p", "n", float(i))])
    now = 4 * 3600 * S
    three_h = r.window(now, 10800)
    assert 10800 - 60 <= three_h.span_s <= 10800
    assert three_h.get("n") == three_h.span_s / 10
    kept = sum(len(level) for level in r._levels)
    assert kept < 61 + 181 + 50  # not one snapshot per scrape


def test_series_gone_for_a_day_are_forgotten() -> None:
    r = RollingTotals[str]()
    r.observe(0, [("old", "n", 1.0)])
    for h in range(1, 27):
        r.observe(h * 3600 * S, [("new", "n", float(h))])
    assert "old" not in r._last and "new" in r._last


@given(st.lists(st.tuples(st.integers(1, 120),  # seconds to the next scrape
                          st.dictionaries(st.sampled_from(["a", "b", "c"]),
                                          st.tuples(st.integers(0, 50), st.booleans()))),
                min_size=1, max_size=60))
def test_windows_sum_the_true_increases(steps: list[tuple[int, dict[str, tuple[int, bool]]]]
                                        ) -> None:
    """Whatever the restarts and gaps: the longest window is every increase since the first
    scrape, and a shorter window never holds more than a longer one."""
    r = RollingTotals[str]()
    values = {"a": 7.0, "b": 0.0, "c": 3.0}
    r.observe(0, [(s, "g", v) for s, v in values.items()])
    now, truth = 0, 0.0
    for dt, changes in steps:
        now += dt * S
        for s, (inc, restart) in changes.items():
            if restart and inc < values[s]:  # one that counts past its old value in a gap
                values[s] = float(inc)       # is taken for the old process (the documented
            else:                            # limit of Prometheus's rule too)
                values[s] += inc
            truth += inc
        r.observe(now, [(s, "g", v) for s, v in values.items()])
    assert r.window(now, 86400).get("g") == truth
    w600, w3h, w1d = (r.window(now, s) for s in (600, 10800, 86400))
    assert w600.get("g") <= w3h.get("g") <= w1d.get("g")
    assert w600.span_s <= 600 and w3h.span_s <= 10800
