"""A task's executor fence: it gives up only after the grace of unacknowledged probes in a
row, never while Kafka answers, probes at most every PROBE_EVERY_S, and each task counts its
own grace. Stateful: checked against a model with hypothesis."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.bolts.kafka_fence import MARKER, PROBE_EVERY_S, ExecutorFence, KafkaCutOff


class Time:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_an_executor_that_keeps_reaching_kafka_never_gives_up() -> None:
    now = Time()
    fence = ExecutorFence(lambda: True, grace_s=15.0, clock=now)
    for _ in range(1000):
        fence.waiting("a range")
        now.t += 1.0


def test_the_grace_runs_from_the_first_unanswered_probe_and_names_the_wait() -> None:
    now, probes = Time(), [True, False, False]
    fence = ExecutorFence(lambda: probes.pop(0) if probes else False, grace_s=15.0, clock=now)
    fence.waiting("x")  # answered at 100
    now.t = 102.0
    fence.waiting("x")  # unanswered since 102
    now.t = 116.9
    fence.waiting("x")
    now.t = 117.0
    with pytest.raises(KafkaCutOff, match=f"^{MARKER}: .* 15 s while waiting for 3 messages"):
        fence.waiting("3 messages")


def test_data_from_kafka_restarts_the_grace() -> None:
    now = Time()
    fence = ExecutorFence(lambda: False, grace_s=15.0, clock=now)
    fence.waiting("x")
    now.t += 14.0
    fence.answered()
    now.t += 2.0
    fence.waiting("x")  # a new disconnection starts here
    now.t += 14.0
    fence.waiting("x")


@given(st.lists(st.tuples(st.sampled_from(["wait", "data"]), st.booleans(),
                          st.floats(0.0, 10.0)), max_size=60))
def test_it_gives_up_exactly_when_the_model_says(steps: list[tuple[str, bool, float]]) -> None:
    """Model: probes run when a wait comes ``PROBE_EVERY_S`` after the last; the earliest
    unanswered probe since the last answer (probe or data) starts the grace; a give-up
    starts the next count afresh."""
    now, grace = Time(), 15.0
    answer = [True]
    probes = []

    def probe() -> bool:
        probes.append(now.t)
        return answer[0]

    fence = ExecutorFence(probe, grace_s=grace, clock=now)
    lost_at: float | None = None
    last_probe: float | None = None
    model_probes = 0
    for kind, ok, dt in steps:
        now.t += dt
        answer[0] = ok
        if kind == "data":
            fence.answered()
            lost_at = None
            continue
        if last_probe is None or now.t - last_probe >= PROBE_EVERY_S:
            last_probe, model_probes = now.t, model_probes + 1
            lost_at = None if ok else (now.t if lost_at is None else lost_at)
        due = lost_at is not None and int(now.t * 1000) - int(lost_at * 1000) >= grace * 1000
        if due:
            with pytest.raises(KafkaCutOff):
                fence.waiting("x")
            lost_at = None
        else:
            fence.waiting("x")
    assert len(probes) == model_probes
