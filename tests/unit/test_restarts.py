"""The restart policy shared by the supervisors: backoff, healthy runs, crash loops."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.restarts import Restarts


def test_a_crash_after_a_healthy_run_restarts_at_once() -> None:
    r = Restarts()
    assert r.exited(now_ms=120_000, counted_from_ms=0) == 120_000
    assert r.due(120_000) and not r.crash_looping


def test_quick_exits_back_off_and_become_a_crash_loop_until_a_healthy_run() -> None:
    r = Restarts(base_delay_ms=1_000, max_delay_ms=8_000, healthy_ms=60_000, crash_loop_after=3)
    now, delays = 0, []
    for _ in range(6):
        due = r.exited(now + 500, now)  # each run lasts half a second
        delays.append(due - (now + 500))
        assert not r.due(due - 1) and r.due(due)
        r.restarted()
        now = due
    assert delays == [0, 2_000, 4_000, 8_000, 8_000, 8_000]
    assert r.crash_looping and r.total == 6
    r.running(now + 59_999, now)
    assert r.crash_looping
    r.running(now + 60_000, now)
    assert not r.crash_looping


@given(st.lists(st.tuples(st.integers(0, 120_000), st.integers(0, 10_000)), max_size=30))
def test_the_delay_is_bounded_and_never_negative(runs: list[tuple[int, int]]) -> None:
    r = Restarts()
    now = 0
    for uptime, gap in runs:
        now += uptime
        due = r.exited(now, now - uptime)
        assert now <= due <= now + r.max_delay_ms
        assert r.crash_looping == (r.in_a_row >= r.crash_loop_after)
        r.restarted()
        now = due + gap
