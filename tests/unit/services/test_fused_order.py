"""The order a head task runs a fused bolt's tasks in (services.bolts.tasks.rotated): every
task once, each head starting on its own, so that heads running at once do not queue for
the same task's lock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.bolts.tasks import rotated

tasks = st.lists(st.integers(0, 64), unique=True).map(sorted)


@given(tasks, st.integers(0, 1_000))
def test_every_task_runs_once_from_the_heads_own_on(ts: list[int], head: int) -> None:
    order = rotated(ts, head)
    assert sorted(order) == ts
    if ts:
        assert order[0] == ts[head % len(ts)]
        # in turn: the task order, wrapped around
        k = ts.index(order[0])
        assert order == ts[k:] + ts[:k]


@given(st.lists(st.integers(0, 64), min_size=2, unique=True).map(sorted))
def test_as_many_heads_as_tasks_all_start_apart(ts: list[int]) -> None:
    assert len({rotated(ts, head)[0] for head in range(len(ts))}) == len(ts)
