"""The culprit search (squall/core/reliability/culprits.py): every record that kills its process is
named, every other one completes in exactly one part, and the search ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import UsageError
from squall.core.reliability.culprits import CulpritSearch, units_of


def simulate(n: int, poison: set[int], parallel: int, per_call: bool,
             at_once: int = 0) -> CulpritSearch:
    """Run the search against a bolt that dies on each ``poison`` unit: named by the call
    (``per_call``, the per-tuple API) or not (a batch bolt's one call)."""
    s = CulpritSearch(n, parallel, at_once=at_once)
    while not s.done:
        started = s.start()
        assert 0 < len(started) <= (at_once or parallel)
        for part in started:
            bad = [u for u in part.units if u in poison]
            if not bad:
                s.completed_part(part)
            else:
                s.died(part, bad[0] if per_call else None, f"killed by {bad[0]}")
        assert s.runs < 10 * (n + 1) * (len(poison) + 1)
    return s


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 300).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, max(0, n - 1)), max_size=min(n, 8)),
    st.integers(1, 6), st.booleans(), st.integers(0, 12))))
def test_every_poison_unit_is_named_and_every_other_completes_once(
        case: tuple[int, set[int], int, bool, int]) -> None:
    n, poison, parallel, per_call, at_once = case
    s = simulate(n, poison, parallel, per_call, at_once)
    assert set(s.culprits) == poison
    assert all(s.culprits[u] == f"killed by {u}" for u in poison)
    done = [u for p in s.completed for u in p.units]
    assert sorted(done) == sorted(set(range(n)) - poison)  # each exactly once


def test_a_named_unit_costs_one_more_run_and_a_batch_call_is_split_in_parallel() -> None:
    s = simulate(100, {42}, parallel=1, per_call=True)
    assert s.runs == 2  # the part that died, then the rest without the culprit
    # Parallel: what ran before the culprit as one part, what was not tried yet in pieces.
    s = CulpritSearch(15, parallel=3)
    first, *others = s.start()
    assert first.units == (0, 1, 2, 3, 4)
    for p in others:
        s.completed_part(p)
    s.died(first, 1, "x")
    assert [p.units for p in s.start()] == [(0,), (2,), (3,)]
    s = simulate(1000, {999}, parallel=4, per_call=False)
    assert s.runs <= 4 + 4 * 5  # a level per quarter: 1000 -> 250 -> 63 -> 16 -> 4 -> 1


def test_a_stateful_bolts_parts_run_one_at_a_time() -> None:
    s = CulpritSearch(10, parallel=1)
    (part,) = s.start()
    assert part.units == tuple(range(10))
    assert s.start() == []  # nothing more while it runs
    s.died(part, None, "x")
    first, = s.start()
    assert first.units == (0, 1, 2, 3, 4)


def test_misuse_is_refused() -> None:
    s = CulpritSearch(3, 1)
    (part,) = s.start()
    with pytest.raises(UsageError, match="unit 7 is not in part"):
        s.died(part, 7, "x")
    s.completed_part(part)
    with pytest.raises(UsageError, match="not running"):
        s.completed_part(part)
    with pytest.raises(UsageError):
        CulpritSearch(3, 0)


def test_units_are_emissions_numbered_in_order_of_first_appearance() -> None:
    assert units_of([9, 9, 4, 9, 0, 4]) == ([0, 0, 1, 0, 2, 1], [0, 2, 4])


def test_units_under_suspicion_run_alone_first_then_the_rest_in_parallel_parts() -> None:
    s = CulpritSearch(10, parallel=2, alone=[7, 3])
    parts = s.start()
    assert [p.units for p in parts] == [(3,), (7,)]
    s.died(parts[0], 3, "again")
    s.completed_part(parts[1])
    assert [p.units for p in s.start()] == [(0, 1, 2, 4), (5, 6, 8, 9)]
    assert s.culprits == {3: "again"}
    with pytest.raises(UsageError, match="not all in"):
        CulpritSearch(3, alone=[3])


def test_a_unit_convicted_elsewhere_runs_in_no_part() -> None:
    s = CulpritSearch(8, parallel=2, alone=[5])
    s.convicted(3, "did not return within 3 s")
    assert [p.units for p in s.start()] == [(5,), (0, 1, 2)]
    assert s.culprits == {3: "did not return within 3 s"}
    with pytest.raises(UsageError, match="cannot be convicted now"):
        s.convicted(4, "x")  # parts run already
