"""The control plane's pure core: lifecycle, assignment, the leader's plan, stats."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.api.stats import aggregate
from squall.core.control.assignment import Kind, Placement, Unit, Worker, assign, units_of
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo, topology_id
from squall.core.control.lifecycle import Lifecycle, Status, apply
from squall.core.control.scheduler import advance, plan, with_parallelism
from squall.core.errors import ConflictError, TopologyError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import BoltSpec, TopologySpec


def spec(name: str = "wc", spouts: int = 2, ackers: int = 2) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("src", ["s"], spouts)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("src")
    b.set_bolt("count", "examples.wordcount:WordCount", 2,
               outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    return b.build(name, ackers=ackers)


# ----- lifecycle (Nimbus) -------------------------------------------------------

def test_activate_deactivate_and_the_no_op_repeats() -> None:
    lc = Lifecycle()
    assert lc.spouts_emit
    off = lc.deactivate()
    assert off.status is Status.INACTIVE and not off.spouts_emit
    assert off.deactivate() == off
    assert off.activate().status is Status.ACTIVE


def test_rebalance_returns_to_the_previous_state_after_its_wait() -> None:
    lc = Lifecycle(Status.INACTIVE).rebalance(1_000, 5, {"src": 3})
    assert lc.status is Status.REBALANCING and not lc.spouts_emit
    assert not lc.due(5_999) and lc.due(6_000)
    assert lc.finish_rebalance() == Lifecycle(Status.INACTIVE)


@pytest.mark.parametrize("event", ["activate", "deactivate", "rebalance"])
def test_a_killed_topology_refuses_everything_but_kill(event: str) -> None:
    killed = Lifecycle().kill(0, 30)
    with pytest.raises(ConflictError, match="KILLED"):
        apply(killed, event, 0, 1)
    assert apply(killed, "kill", 10_000, 1).deadline_ms == 11_000  # kill again: new wait


def test_rebalancing_refuses_activate_and_a_second_rebalance() -> None:
    lc = Lifecycle().rebalance(0, 10)
    for event in ("activate", "deactivate", "rebalance"):
        with pytest.raises(ConflictError):
            apply(lc, event, 0, 1)
    assert apply(lc, "kill", 0, 0).status is Status.KILLED


def test_bad_waits_and_parallelism_name_the_value() -> None:
    with pytest.raises(TopologyError, match="-1"):
        Lifecycle().kill(0, -1)
    with pytest.raises(TopologyError, match=r"'src'.*0"):
        Lifecycle().rebalance(0, 1, {"src": 0})


def test_lifecycle_round_trips_through_json() -> None:
    lc = Lifecycle(Status.ACTIVE).rebalance(5, 2, {"src": 4})
    assert Lifecycle.from_dict(lc.to_dict()) == lc


def test_a_submission_runs_under_an_id_of_its_own_and_keeps_its_name() -> None:
    tid = topology_id("wordcount", 7, 1_795_798_502_999)
    assert tid == "wordcount-7-1795798502"
    s = spec(tid)
    assert s.edges_from("src")[0].topic.startswith(f"squall.{tid}.edge.")
    rec = TopologyRecord(tid, s, Lifecycle(), 0, name="wordcount")
    back = TopologyRecord.from_json(rec.to_json(), 4)
    assert (back.id, back.display_name, back.spec.name, back.version) == (
        tid, "wordcount", tid, 4)
    # A record stored before ids were unique reads with its id as its name.
    assert TopologyRecord.from_json(TopologyRecord("wc", spec(), Lifecycle(), 0).to_json()
                                    .replace(b'"name": "wc", ', b"", 1), 0).display_name == "wc"
    # The longest name with the largest counter and time still makes a valid spec.
    assert spec(topology_id("n" * 64, 2**31 - 1, 9_999_999_999_999)).validate()


# ----- assignment ---------------------------------------------------------------

def workers(kind: Kind, n: int, cap: int = 100) -> list[Worker]:
    return [Worker(f"{kind}-{i}", kind, cap) for i in range(n)]


def test_units_of_a_topology() -> None:
    units = units_of("wc", spec(spouts=3, ackers=2))
    kinds = Counter(u.kind for u in units)
    assert kinds == {Kind.SPOUT: 3, Kind.ACKER: 2, Kind.BOLTS: 2}


def test_even_spread_and_capacity() -> None:
    units = [Unit("t", Kind.SPOUT, "s", i) for i in range(7)]
    a = assign(units, workers(Kind.SPOUT, 3))
    assert sorted(Counter(a.where.values()).values()) == [2, 2, 3]
    small = assign(units, [Worker("a", Kind.SPOUT, 2), Worker("b", Kind.SPOUT, 3)])
    assert len(small.where) == 5 and len(small.unassigned) == 2


def test_units_go_only_to_workers_of_their_kind() -> None:
    a = assign(units_of("wc", spec()), workers(Kind.SPOUT, 1) + workers(Kind.ACKER, 1))
    assert {u.kind for u in a.unassigned} == {Kind.BOLTS}
    assert all(w.startswith(str(u.kind)) for u, w in a.where.items())


def test_a_lost_worker_moves_only_its_own_units() -> None:
    units = [Unit("t", Kind.ACKER, "__acker", i) for i in range(6)]
    ws = workers(Kind.ACKER, 3)
    before = assign(units, ws).where
    after = assign(units, ws[:2], before).where
    moved = {u for u in units if before[u] != after[u]}
    assert moved == {u for u in units if before[u] == ws[2].id}
    assert sorted(Counter(after.values()).values()) == [3, 3]


def test_a_new_worker_takes_a_fair_share() -> None:
    units = [Unit("t", Kind.SPOUT, "s", i) for i in range(4)]
    ws = workers(Kind.SPOUT, 1)
    one = assign(units, ws).where
    two = assign(units, workers(Kind.SPOUT, 2), one).where
    assert sorted(Counter(two.values()).values()) == [2, 2]


@given(st.integers(0, 40), st.lists(st.integers(1, 10), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_assignment_is_balanced_within_capacity(n: int, caps: list[int], rnd: object) -> None:
    units = [Unit("t", Kind.ACKER, "__acker", i) for i in range(n)]
    ws = [Worker(f"w{i}", Kind.ACKER, c) for i, c in enumerate(caps)]
    a = assign(units, ws)
    load = Counter(a.where.values())
    assert len(a.where) + len(a.unassigned) == n
    assert len(a.where) == min(n, sum(caps))
    assert all(load[w.id] <= w.capacity for w in ws)
    # Nobody with room sits below another's load minus one (even, as far as capacity allows).
    for w in ws:
        if load[w.id] < w.capacity:
            assert all(load[v.id] <= load[w.id] + 1 for v in ws)


# ----- the leader's plan ----------------------------------------------------------

def rec(lc: Lifecycle, s: TopologySpec | None = None) -> TopologyRecord:
    s = s or spec()
    return TopologyRecord(s.name, s, lc, 0, 3)


def info(w: Worker) -> WorkerInfo:
    return WorkerInfo(w, "h", 1, 0)


def test_plan_assigns_and_marks_spouts_active_or_not() -> None:
    ws = [info(w) for w in workers(Kind.SPOUT, 1) + workers(Kind.ACKER, 1)
          + workers(Kind.BOLTS, 1)]
    p = plan([rec(Lifecycle(Status.INACTIVE))], ws, {}, 0)
    spout = p.assignments["spout-0"]
    assert [pl.tasks for pl in spout.placements] == [(0, 1)]
    assert spout.active == {"wc": False}
    assert {pl.component for pl in p.assignments["bolts-0"].placements} == {"split", "count"}
    assert p.unassigned == ()


def test_plan_removes_killed_topologies_after_their_wait() -> None:
    r = rec(Lifecycle().kill(0, 5))
    ws = [info(w) for w in workers(Kind.SPOUT, 1)]
    during = plan([r], ws, {}, 4_999)
    assert during.removals == () and during.assignments["spout-0"].active == {"wc": False}
    after = plan([r], ws, {"spout-0": during.assignments["spout-0"]}, 5_000)
    assert after.removals == ("wc",)
    assert after.assignments["spout-0"] == WorkerAssignment()


def test_plan_finishes_a_rebalance_with_the_new_spout_parallelism() -> None:
    r = rec(Lifecycle().rebalance(0, 1, {"src": 1}))
    assert advance(r, 999) is r
    done = advance(r, 1_000)
    assert done is not None and done.lifecycle == Lifecycle(Status.ACTIVE)
    assert done.spec.component("src").parallelism == 1


def test_a_bolt_rebalances_its_executors_within_its_tasks() -> None:
    """Storm's rule: executors change, tasks (here the edge topics' partitions) stay."""
    s = with_parallelism(spec(), {"split": 1})
    split = s.component("split")
    assert isinstance(split, BoltSpec)
    assert (split.parallelism, split.num_executors) == (2, 1)
    assert TopologySpec.from_dict(s.to_dict()) == s  # the executors travel with the spec
    with pytest.raises(TopologyError, match=r"1\.\.2 executors, not 4: its 2 tasks are the "
                                            r"partitions of its edge topics"):
        with_parallelism(spec(), {"split": 4})
    with pytest.raises(TopologyError, match="no component"):
        with_parallelism(spec(), {"nope": 4})


# ----- stats ---------------------------------------------------------------------

def test_aggregate_sums_tasks_and_interpolates_quantiles() -> None:
    lab = {"topology": "wc", "component": "src"}
    samples = [("squall_spout_acked_total", lab, 10.0), ("squall_spout_acked_total", lab, 5.0),
               ("squall_spout_acked_total", {"topology": "other", "component": "src"}, 99.0),
               ("squall_acker_records_total", {"topology": "wc", "kind": "ack"}, 7.0)]
    for le, c in ((0.5, 0.0), (1.0, 50.0), (2.0, 100.0), (math.inf, 100.0)):
        samples.append(("squall_spout_complete_latency_seconds_bucket",
                        {**lab, "le": str(le)}, c))
    samples += [("squall_spout_complete_latency_seconds_sum", lab, 120.0),
                ("squall_spout_complete_latency_seconds_count", lab, 100.0)]
    st_ = aggregate(samples, "wc")
    assert st_["src"].counters["acked"] == 15
    assert st_["__acker"].counters["records"] == 7
    assert st_["src"].quantile(0.5) == pytest.approx(1.0)
    assert st_["src"].quantile(0.75) == pytest.approx(1.5)
    assert st_["src"].latency_ms() == pytest.approx(1200.0)


def test_a_unit_moves_only_once_its_old_worker_let_go_of_it() -> None:
    """A worker back from a partition takes a share again: each unit that moves to it is
    first dropped by the worker that runs it (which stops its process, a spout draining),
    and given to it only once that worker no longer runs it nor stops processes of its
    topology. No task runs on two workers at once."""
    old, back = workers(Kind.SPOUT, 2)
    r = rec(Lifecycle(Status.ACTIVE))
    alone = plan([r], [info(old)], {}, 0).assignments  # both tasks on the old worker
    running = ({"topology": "wc", "kind": "spout", "component": "src", "url": "u",
                "tasks": [0, 1]},)
    busy = WorkerInfo(old, "h", 1, 0, running)
    first = plan([r], [busy, info(back)], alone, 1)
    assert [pl.tasks for pl in first.assignments[old.id].placements] == [(0,)]
    assert first.assignments[back.id] == WorkerAssignment()  # held back
    # its old process (tasks 0 and 1) still stopping, a spout draining
    draining = WorkerInfo(old, "h", 1, 0, ({**running[0], "stopping": True},), ("wc",))
    assert plan([r], [draining, info(back)], first.assignments, 2
                ).assignments[back.id] == WorkerAssignment()
    let_go = WorkerInfo(old, "h", 1, 0, ({**running[0], "tasks": [0]},))
    after = plan([r], [let_go, info(back)], first.assignments, 3)
    assert [pl.tasks for pl in after.assignments[back.id].placements] == [(1,)]
    # A worker that died holds nothing: its units move at once.
    assert [pl.tasks for pl in plan([r], [info(back)], alone, 4).assignments[back.id]
            .placements] == [(0, 1)]


def test_an_assignment_is_written_for_the_session_its_worker_registered_in() -> None:
    """A worker whose ZooKeeper session ended registers again in a new one: its assignment
    is written anew for that session (the node changes, so that the worker hears of it),
    and the old one, written for the session that ended, is not to be run."""
    (w,) = workers(Kind.SPOUT, 1)
    r = rec(Lifecycle(Status.ACTIVE))
    first = plan([r], [WorkerInfo(w, "h", 1, 0, session="a1")], {}, 0).assignments[w.id]
    assert first.session == "a1" and first.placements
    again = plan([r], [WorkerInfo(w, "h", 1, 0, session="b2")], {w.id: first}, 1)
    assert again.assignments[w.id].session == "b2"
    assert again.assignments[w.id] != first  # the leader writes it: it differs
    assert again.assignments[w.id].placements == first.placements


@given(st.lists(st.sampled_from(["src", "split"]), max_size=3), st.text(max_size=12),
       st.dictionaries(st.text(max_size=8), st.booleans(), max_size=3))
def test_assignments_and_worker_info_round_trip_through_json(
        comps: list[str], session: str, active: dict[str, bool]) -> None:
    a = WorkerAssignment(tuple(Placement("wc", Kind.BOLTS, c, (i,)) for i, c in
                               enumerate(comps)), {}, active, session)
    assert WorkerAssignment.from_json(a.to_json()) == a
    (w,) = workers(Kind.BOLTS, 1)
    i = WorkerInfo(w, "h", 7, 3, ({"topology": "wc", "tasks": [0]},), ("wc",), session)
    assert WorkerInfo.from_json(i.to_json()) == i


def test_a_unit_that_stays_put_is_never_held_back() -> None:
    """A worker stopping a process of the topology (its own unit moving away, a rolling
    restart) holds back only the units that process ran: every other worker's units run on."""
    s, a = workers(Kind.SPOUT, 1), workers(Kind.ACKER, 2)
    r = rec(Lifecycle(Status.ACTIVE))
    ws = [info(w) for w in s + a]
    start = plan([r], ws, {}, 0).assignments
    stays = [pl.tasks for pl in start[a[0].id].placements]
    assert stays
    acker = {"topology": "wc", "kind": "acker", "component": "__acker", "url": "u"}
    # The second acker worker stops its process (its task moving), the spout worker too.
    leaving = WorkerInfo(a[1], "h", 1, 0, ({**acker, "tasks": [1], "stopping": True},),
                         ("wc",))
    spout = WorkerInfo(s[0], "h", 1, 0, (), ("wc",))
    after = plan([r], [spout, info(a[0]), leaving], start, 1).assignments
    assert [pl.tasks for pl in after[a[0].id].placements] == stays  # not held
    assert after[s[0].id].placements == start[s[0].id].placements
