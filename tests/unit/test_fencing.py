"""The worker's fence (squall/core/control/fencing.py) as a state machine: the tasks stop
once a lost connection lasted the grace, only once per disconnection, never without a
grace, and nothing starts until the connection is back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.fencing import Decision, Fence, Kill, WorkerFences, check_grace
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


worker_events = st.lists(st.tuples(
    st.sampled_from(["CONNECTED", "SUSPENDED", "LOST", "kafka-ok", "kafka-down", "tick"]),
    st.integers(0, 4_000)), max_size=50)


@given(worker_events)
def test_a_worker_never_runs_tasks_of_a_session_that_may_have_ended(
        steps: list[tuple[str, int]]) -> None:
    """Whatever ZooKeeper and Kafka do: tasks are paused before the session can end, never
    resumed after it ended, killed once it surely ended, and not started while cut off."""
    grace, session = 1_000, 6_000
    f = WorkerFences(grace, 10_000, session)
    now, lost_at, running, paused, ended_unacted = 0, None, True, False, False
    for what, dt in steps:
        now += dt
        if what in ("CONNECTED", "SUSPENDED", "LOST"):
            f.zookeeper(what, now)
            if what == "LOST":
                ended_unacted = True
            lost_at = None if what == "CONNECTED" else (now if lost_at is None else lost_at)
        elif what != "tick":
            f.kafka_reachable(what == "kafka-ok", now)
        d = f.decide(now)
        assert not (d.pause and d.kill), d
        if d.pause:
            paused = True
        if d.resume:
            assert not ended_unacted, "resumed what a session that ended ran"
            paused = False
        if d.kill is not None:
            running, paused, ended_unacted = False, False, False  # whatever the reason
        if d.may_start and not paused:
            running = True
        if lost_at is not None and running and not paused:
            # a task left running while cut off: only before the grace
            assert now - lost_at < grace, (what, now, lost_at, d)
        if lost_at is not None and now - lost_at >= session:
            assert not running, "a task outlived the session"
        assert not (d.may_start and lost_at is not None)


def test_a_cut_that_outlasts_the_session_kills_without_waiting_for_the_reconnect() -> None:
    f = WorkerFences(1_000, None, 6_000)
    f.zookeeper("SUSPENDED", 0)
    assert f.decide(999) == Decision(may_start=False)
    assert f.decide(1_000).pause
    assert f.decide(5_999) == Decision(may_start=False)
    d = f.decide(6_000)
    assert d.kill is Kill.SESSION_TIMED_OUT and d.lost_for_ms == 6_000
    assert f.decide(9_000).kill is None  # once
    f.zookeeper("LOST", 9_500)  # ZooKeeper says so on reconnecting: nothing left to kill
    assert f.decide(9_500).kill is Kill.SESSION_ENDED
    f.zookeeper("CONNECTED", 9_600)
    assert f.decide(9_600) == Decision()


def test_a_kill_for_kafka_leaves_zookeepers_fence_armed() -> None:
    f = WorkerFences(1_000, 10_000, 6_000)
    f.kafka_reachable(False, 0)
    d = f.decide(10_000)
    assert d.kill is Kill.KAFKA and d.withdraw
    f.zookeeper("SUSPENDED", 20_000)
    assert f.decide(21_000).pause
