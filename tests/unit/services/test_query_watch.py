"""A micro-batch that does not end, as the bolts driver sees it (services/bolts/query_watch.py)."""

from __future__ import annotations

from services.bolts.query_watch import StallWatch, limit_s


def test_a_running_batch_ages_until_another_ends_and_idle_is_no_stall() -> None:
    w = StallWatch()
    assert w.observe(0.0, True, 4) == 0.0  # batch 5 starts
    assert w.observe(30.0, True, 4) == 30.0
    assert w.observe(31.0, True, 5) == 0.0  # batch 5 ended; batch 6 runs
    assert w.observe(40.0, True, 5) == 9.0
    assert w.observe(41.0, False, 6) == 0.0  # idle: nothing to wait for
    assert w.observe(500.0, False, 6) == 0.0
    assert w.observe(501.0, True, None) == 0.0  # a query's first batch
    assert w.observe(530.0, True, None) == 29.0


def test_the_limit_leaves_room_to_find_culprits_and_is_never_short() -> None:
    assert limit_s(15) == 300.0
    assert limit_s(60) == 600.0
