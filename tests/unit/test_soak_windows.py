"""The soak's growth compares medians of windows, so one sample at a lag peak does not
count as growth, and a steady rise does."""

from __future__ import annotations

from benchmarks.soak import _growth, lived_growth, window_median


def samples(rss: list[float]) -> list[tuple[float, int, dict[str, float]]]:
    return [(15.0 * i, 0, {"acker": v}) for i, v in enumerate(rss)]


def test_a_peak_at_the_last_sample_is_not_growth_but_a_rise_is() -> None:
    flat_then_peak = samples([90, 95, 94, 95, 94, 95, 94, 95, 94, 105])
    start = window_median(flat_then_peak, 15, 60)
    end = window_median(flat_then_peak, 135 - 45, 136)
    assert (start, end) == ({"acker": 95.0}, {"acker": 94.5})
    assert _growth(start, end) == {"acker": -0.005}
    rising = samples([90, 91, 92, 93, 94, 95, 96, 97, 98, 99])
    assert _growth(window_median(rising, 15, 60), window_median(rising, 90, 136)) == {
        "acker": 0.06}
    assert window_median(rising, 1000, 2000) == {}


def test_each_process_that_lived_through_both_windows_has_its_own_growth() -> None:
    # A Python worker Spark started between the windows adds to its tree's sum, and is
    # no process's growth; the JVM that grew is.
    each = [(0.0, {"bolts/jvm/1": 800.0, "bolts/python_worker/2": 100.0}),
            (15.0, {"bolts/jvm/1": 810.0, "bolts/python_worker/2": 100.0}),
            (30.0, {"bolts/jvm/1": 900.0, "bolts/python_worker/2": 100.0,
                    "bolts/python_worker/3": 300.0}),
            (45.0, {"bolts/jvm/1": 1000.0, "bolts/python_worker/2": 101.0,
                    "bolts/python_worker/3": 300.0})]
    assert lived_growth(each, (0, 30), (30, 46)) == {
        "bolts/jvm/1": [805.0, 950.0, 0.18], "bolts/python_worker/2": [100.0, 100.5, 0.005]}
    assert lived_growth(each, (100, 200), (30, 46)) == {}
