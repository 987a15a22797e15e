"""What the leader does each round, as a pure function of what it read.

Given the topologies, the live workers and the current assignments, at time
``now``: finish rebalances and kills whose wait is over, then assign every
topology's units over the workers (sticky and balanced, see
:mod:`squall.core.control.assignment`). The caller writes the result to ZooKeeper.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from squall.core.control.assignment import Kind, Unit, assign, units_of
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.lifecycle import Lifecycle, Status
from squall.core.errors import TopologyError
from squall.core.topology.model import SpoutSpec, TopologySpec


@dataclass(frozen=True)
class Plan:
    updates: tuple[TopologyRecord, ...]  # records whose lifecycle moved on
    removals: tuple[str, ...]  # killed topologies whose wait is over
    assignments: dict[str, WorkerAssignment]  # per live worker (empty: runs nothing)
    unassigned: tuple[Unit, ...]


def with_parallelism(spec: TopologySpec, parallelism: Mapping[str, int]) -> TopologySpec:
    """``spec`` rebalanced, as Storm's ``executors``: a spout's number is its parallelism
    (its tasks, over the source partitions); a bolt's is its executors, 1..its tasks
    (its tasks are its edge topics' partitions, which stay, as Storm's tasks do)."""
    for name, n in parallelism.items():
        c = spec.component(name)
        if not isinstance(c, SpoutSpec) and not 1 <= n <= c.parallelism:
            raise TopologyError(
                f"rebalance: bolt {name!r} can run on 1..{c.parallelism} executors, not {n}: "
                f"its {c.parallelism} tasks are the partitions of its edge topics, which "
                "cannot change in place (resubmit the topology with another parallelism)")
    spouts = tuple(dataclasses.replace(s, parallelism=parallelism.get(s.name, s.parallelism))
                   for s in spec.spouts)
    bolts = tuple(dataclasses.replace(b, executors=parallelism[b.name])
                  if b.name in parallelism else b for b in spec.bolts)
    return dataclasses.replace(spec, spouts=spouts, bolts=bolts).validate()


def advance(rec: TopologyRecord, now_ms: int) -> TopologyRecord | None:
    """The record after its wait ends (None: remove it); ``rec`` itself if nothing is due."""
    lc = rec.lifecycle
    if not lc.due(now_ms):
        return rec
    if lc.status is Status.KILLED:
        return None
    if lc.status is Status.REBALANCING:
        spec = with_parallelism(rec.spec, lc.parallelism)
        return dataclasses.replace(rec, spec=spec, lifecycle=lc.finish_rebalance())
    return dataclasses.replace(rec, lifecycle=Lifecycle(lc.status))


def plan(records: Iterable[TopologyRecord], workers: Iterable[WorkerInfo],
         current: Mapping[str, WorkerAssignment], now_ms: int) -> Plan:
    updates, removals, live = [], [], []
    for rec in records:
        nxt = advance(rec, now_ms)
        if nxt is None:
            removals.append(rec.id)
            continue
        if nxt is not rec:
            updates.append(nxt)
        live.append(nxt)
    previous = {Unit(p.topology, p.kind, p.component, t): w
                for w, a in current.items() for p in a.placements for t in p.tasks}
    units = [u for rec in live for u in units_of(rec.id, rec.spec)]
    ws = list(workers)
    result = assign(units, [w.worker for w in ws], previous)
    held = released_first(result.where, ws)
    result = dataclasses.replace(
        result, where={u: w for u, w in result.where.items() if u not in held})
    by_id = {rec.id: rec for rec in live}
    out: dict[str, WorkerAssignment] = {}
    placements = result.placements()
    for w in ws:
        mine = tuple(placements.get(w.worker.id, ()))
        ids = sorted({p.topology for p in mine})
        out[w.worker.id] = WorkerAssignment(
            mine, {i: by_id[i].spec.to_dict() for i in ids},
            {i: by_id[i].lifecycle.spouts_emit for i in ids}, w.session)
    return Plan(tuple(updates), tuple(removals), out, result.unassigned)


def released_first(where: Mapping[Unit, str], workers: Iterable[WorkerInfo]) -> set[Unit]:
    """The units to hold back this round: each is to move to a worker while another live
    worker still runs it or still stops a process that ran it (a spout drains first; each
    worker publishes its stopping processes with their tasks until they exit). Its old
    owner's assignment drops it now; its new owner gets it once the old one let go, so that
    no task runs on two workers at once. A unit that stays where it runs is never held,
    whatever else is stopping; a worker that died or whose session ended holds nothing: its
    units move at once."""
    running: dict[Unit, set[str]] = {}
    kinds = {k.value: k for k in Kind}
    for w in workers:
        for e in w.endpoints:
            kind = kinds.get(str(e.get("kind", "")))
            if kind is None:  # the worker's own endpoint
                continue
            for task in e.get("tasks") or (0,):
                u = Unit(str(e.get("topology", "")), kind, str(e.get("component", "")),
                         int(task))
                running.setdefault(u, set()).add(w.worker.id)
    return {u for u, w in where.items() if running.get(u, set()) - {w}}
