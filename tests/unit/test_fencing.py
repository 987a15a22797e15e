"""The worker's fence (squall/core/control/fencing.py) as a state machine: the tasks stop
once a lost connection lasted the grace, only once per disconnection, never without a
grace, and nothing starts until the connection is back."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.fencing import (
    PEER_ROUNDS,
    Decision,
    Fence,
    Kill,
    WorkerFences,
    check_grace,
    others_acknowledged,
)
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
    st.sampled_from(["CONNECTED", "SUSPENDED", "LOST", "kafka-ok", "kafka-down", "kafka-alone",
                     "tick"]),
    st.integers(0, 4_000)), max_size=50)


@given(worker_events)
def test_a_worker_never_runs_tasks_of_a_session_that_may_have_ended(
        steps: list[tuple[str, int]]) -> None:
    """Whatever ZooKeeper and Kafka do: tasks are paused before the session can end, never
    resumed after it ended, killed once it surely ended, and not started while cut off;
    withdrawn for Kafka only after the grace, or the shorter one while others reach it."""
    grace, session, kgrace, alone = 1_000, 6_000, 10_000, 4_000
    f = WorkerFences(grace, kgrace, session, kafka_alone_ms=alone)
    now, lost_at, running, paused, ended_unacted = 0, None, True, False, False
    kafka_lost_at: int | None = None
    for what, dt in steps:
        now += dt
        if what in ("CONNECTED", "SUSPENDED", "LOST"):
            f.zookeeper(what, now)
            if what == "LOST":
                ended_unacted = True
            lost_at = None if what == "CONNECTED" else (now if lost_at is None else lost_at)
        elif what != "tick":
            f.kafka_reachable(what == "kafka-ok", now, others=what == "kafka-alone")
            kafka_lost_at = None if what == "kafka-ok" else \
                (now if kafka_lost_at is None else kafka_lost_at)
        d = f.decide(now)
        if d.kill is Kill.KAFKA:
            assert kafka_lost_at is not None
            assert now - kafka_lost_at >= (alone if d.alone else kgrace), (now, d)
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


def test_a_worker_alone_in_its_cut_gives_up_after_the_shorter_grace() -> None:
    f = WorkerFences(None, 20_000, None, kafka_alone_ms=8_000)
    f.kafka_reachable(False, 1_000, others=True)
    assert f.decide(8_999).kill is None
    d = f.decide(9_000)
    assert d.kill is Kill.KAFKA and d.withdraw and d.alone and d.lost_for_ms == 8_000
    assert f.decide(30_000).kill is None  # once per cut


def test_a_cut_others_share_waits_the_whole_grace() -> None:
    """A broker's failover holds every worker's writes: nobody's are acknowledged, and a
    worker whose last round saw others' acknowledged, then its own, starts over."""
    f = WorkerFences(None, 20_000, None, kafka_alone_ms=8_000)
    f.kafka_reachable(False, 0, others=False)
    assert f.decide(19_999).kill is None
    f.kafka_reachable(False, 7_000, others=True)
    f.kafka_reachable(True, 9_000, others=False)  # its own came back
    f.kafka_reachable(False, 10_000, others=False)
    assert f.decide(18_500).kill is None
    d = f.decide(30_000)
    assert d.kill is Kill.KAFKA and not d.alone


def test_others_evidence_without_a_kafka_fence_does_nothing() -> None:
    f = WorkerFences(None, None, None, kafka_alone_ms=8_000)
    f.kafka_reachable(False, 0, others=True)
    assert f.decide(60_000) == Decision()


readings = st.dictionaries(st.sampled_from("abcd"),
                           st.tuples(st.integers(1, 3), st.integers(0, 6)), max_size=4)


@given(readings, readings)
def test_others_acknowledged_is_two_rounds_of_one_incarnation(
        before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> None:
    want = any(w in before and before[w][0] == inc and n >= before[w][1] + PEER_ROUNDS
               for w, (inc, n) in after.items())
    assert others_acknowledged(before, after) is want


def test_a_restarted_or_new_peer_is_no_evidence() -> None:
    assert not others_acknowledged({"a": (5, 10)}, {"a": (9, 30)})  # another incarnation
    assert not others_acknowledged({}, {"a": (5, 30)})
    assert not others_acknowledged({"a": (5, 10)}, {"a": (5, 11)})  # may have been sent before
    assert others_acknowledged({"a": (5, 10), "b": (1, 0)}, {"a": (5, 12), "b": (1, 0)})
