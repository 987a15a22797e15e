"""The worker's fence (squall/core/control/fencing.py) as a state machine: the tasks stop
once a lost connection lasted the grace, only once per disconnection, never without a
grace, and nothing starts until the connection is back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.fencing import Fence, check_grace
from squall.core.errors import ConfigError

events = st.lists(st.tuples(st.sampled_from(["lost", "back", "tick"]), st.integers(0, 3_000)),
                  max_size=40)


@given(st.one_of(st.none(), st.integers(0, 2_000)), events)
def test_the_fence_against_a_model(grace: int | None, steps: list[tuple[str, int]]) -> None:
    f = Fence(grace)
    now, lost_at, fenced = 0, None, False
    for what, dt in steps:
        now += dt
        if what == "lost":
            f.disconnected(now)
            lost_at = now if lost_at is None else lost_at
        elif what == "back":
            f.connected()
            lost_at, fenced = None, False
        due = grace is not None and lost_at is not None and not fenced \
            and now - lost_at >= grace
        assert f.due(now) is due
        if due:
            f.stopped()
            fenced = True
            assert not f.due(now)  # once per disconnection
        assert f.may_start() is (grace is None or lost_at is None)


def test_a_grace_too_long_for_the_session_is_refused_naming_both() -> None:
    check_grace(None, 6.0)
    check_grace(1.9, 6.0)
    with pytest.raises(ConfigError, match=r"fence_after_s 2.0 .* \(6.0 s\)"):
        check_grace(2.0, 6.0)
