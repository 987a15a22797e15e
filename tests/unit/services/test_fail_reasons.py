"""The spout keeps why roots failed until it reads their results, and a bounded number."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squall.core.reliability.progress import AckerClocks
from squall.core.tasks.spout_reasons import MAX_REASONS, FailReasons


def test_a_reason_is_kept_until_its_failed_result_is_read() -> None:
    r = FailReasons()
    r.add({1: "raised ValueError", 2: "did not return within 3 s"})
    r.read([1, 7])
    assert r == {2: "did not return within 3 s"}


@given(st.lists(st.integers(0, 3 * MAX_REASONS), max_size=50))
def test_at_most_max_reasons_are_kept_the_newest(extra: list[int]) -> None:
    r = FailReasons()
    r.add({i: "x" for i in range(MAX_REASONS + 5)})
    r.read(extra)
    assert len(r) <= MAX_REASONS
    assert MAX_REASONS + 4 in r or MAX_REASONS + 4 in extra


def test_the_ackers_clock_is_the_earliest_once_every_acker_told_it() -> None:
    c = AckerClocks(2)
    c.stamp(b"0", 500)
    assert c.now() is None  # acker 1 has said nothing yet
    c.stamp(b"1", 300)
    c.stamp(b"1", 200)  # a stamp never moves a clock back
    assert c.now() == 300
    c.stamp(b"0", 900)
    c.stamp(b"1", 400)
    assert c.now() == 400
