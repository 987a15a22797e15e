"""A micro-batch after an idle spell waits for its burst to land, boundedly
(squall/core/reliability/linger.py), against simulated edges whose ends grow over time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from squall.core.reliability.linger import Linger

STEP = 5  # ms between looks, as the source polls

# A burst: (ms after the first record, partition, records) arrivals, in time order.
arrivals = st.lists(st.tuples(st.integers(0, 300), st.sampled_from(["e:0", "e:1"]),
                              st.integers(1, 50)), min_size=1, max_size=30).map(sorted)


def ends_at(burst: list[tuple[int, str, int]], t: int) -> dict[str, int]:
    out = {"e:0": 0, "e:1": 0}
    for at, key, n in burst:
        if at <= t:
            out[key] += n
    return out


def offer(linger: Linger, burst: list[tuple[int, str, int]], t0: int,
          budget: int | None) -> tuple[int, dict[str, int]]:
    """Look every STEP ms from ``t0`` until ready; when, and the ends offered."""
    start = {"e:0": 0, "e:1": 0}
    t = t0
    while not linger.ready(t, start, ends_at(burst, t), budget):
        t += STEP
        assert t - t0 <= 10_000, "never ready"
    linger.offered(start, ends_at(burst, t))
    return t, ends_at(burst, t)


@given(arrivals, st.integers(0, 40), st.integers(0, 200), st.none() | st.integers(1, 500))
def test_waits_for_quiet_or_the_bound_or_a_full_batch(
        burst: list[tuple[int, str, int]], quiet: int, bound: int, budget: int | None) -> None:
    burst = [(at - burst[0][0], key, n) for at, key, n in burst]  # the first record at 0
    t, ends = offer(Linger(quiet, bound), burst, 0, budget)
    full = budget is not None and sum(ends.values()) >= budget
    # The look at which the ends were last seen to move.
    seen = max(-(-at // STEP) * STEP for at, _, _ in burst if at <= t)
    if bound <= 0:
        assert t == 0
        return
    # Bounded: never later than the bound after the first look (plus one look).
    assert t <= bound + STEP
    # Never cut while records still came, unless the bound passed or the batch is full.
    assert t - seen >= quiet or t >= bound or full
    # And no later than needed: one look earlier, none of the three held.
    if t > 0:
        before = ends_at(burst, t - STEP)
        assert t - STEP - seen < quiet or t - STEP == seen
        assert t - STEP < bound
        assert budget is None or sum(before.values()) < budget


@given(st.integers(1, 40), st.integers(50, 400))
def test_a_burst_faster_than_quiet_goes_in_one_batch(quiet: int, bound: int) -> None:
    # Records every quiet - 1 ms (never quiet while it lasts), for less than the bound.
    gap = max(1, quiet - 1)
    burst = [(i * gap, "e:0", 10) for i in range(max(1, (bound - quiet - STEP) // gap))]
    t, ends = offer(Linger(quiet, bound), burst, 0, None)
    assert ends["e:0"] == 10 * len(burst)
    assert t >= burst[-1][0] + quiet


def test_an_offer_after_a_batch_is_made_at_once_and_one_after_nothing_lingers() -> None:
    linger = Linger(20, 100)
    start = {"e:0": 0}
    assert not linger.ready(0, start, {"e:0": 5}, None)  # idle at first: lingers
    assert linger.ready(20, start, {"e:0": 5}, None)  # quiet for 20 ms
    linger.offered(start, {"e:0": 5})
    # The batch ran; more came meanwhile: offered at once.
    assert linger.ready(300, {"e:0": 5}, {"e:0": 9}, None)
    linger.offered({"e:0": 5}, {"e:0": 9})
    # Nothing waiting: ready (an empty offer), and the next offer lingers again.
    assert linger.ready(400, {"e:0": 9}, {"e:0": 9}, None)
    linger.offered({"e:0": 9}, {"e:0": 9})
    assert linger.idle
    assert not linger.ready(500, {"e:0": 9}, {"e:0": 12}, None)
    assert not linger.ready(510, {"e:0": 9}, {"e:0": 14}, None)  # moved: quiet again from here
    assert not linger.ready(529, {"e:0": 9}, {"e:0": 14}, None)
    assert linger.ready(530, {"e:0": 9}, {"e:0": 14}, None)


def test_a_full_batch_and_a_zero_bound_do_not_wait() -> None:
    assert Linger(20, 100).ready(0, {"e:0": 0}, {"e:0": 2000}, 2000)
    assert Linger(20, 0).ready(0, {"e:0": 0}, {"e:0": 1}, None)
    bounded = Linger(50, 30)
    assert not bounded.ready(0, {"e:0": 0}, {"e:0": 1}, None)
    assert not bounded.ready(10, {"e:0": 0}, {"e:0": 2}, None)
    assert bounded.ready(30, {"e:0": 0}, {"e:0": 3}, None)  # still moving: the bound
