"""What the leader does each round, as a pure function of what it read.

Given the topologies, the live workers and the current assignments, at time
``now``: finish rebalances and kills whose wait is over, then assign every
topology's units over the workers (sticky and balanced, see
:mod:`squall.core.assignment`). The caller writes the result to ZooKeeper.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from squall.core.assignment import Unit, assign, units_of
from squall.core.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.errors import TopologyError
from squall.core.lifecycle import Lifecycle, Status
from squall.core.topology import SpoutSpec, TopologySpec


@dataclass(frozen=True)
class Plan:
    updates: tuple[TopologyRecord, ...]  # records whose lifecycle moved on
    removals: tuple[str, ...]  # killed topologies whose wait is over
    assignments: dict[str, WorkerAssignment]  # per live worker (empty: runs nothing)
    unassigned: tuple[Unit, ...]


def with_parallelism(spec: TopologySpec, parallelism: Mapping[str, int]) -> TopologySpec:
    """``spec`` with new spout parallelism; bolts keep theirs (their edge topics' partitions)."""
    for name in parallelism:
        c = spec.component(name)
        if not isinstance(c, SpoutSpec):
            raise TopologyError(
                f"rebalance: {name!r} is a bolt; its parallelism is the partition count of its "
                "edge topics and cannot change in place (resubmit the topology to change it)")
    spouts = tuple(dataclasses.replace(s, parallelism=parallelism.get(s.name, s.parallelism))
                   for s in spec.spouts)
    return dataclasses.replace(spec, spouts=spouts).validate()


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
    by_id = {rec.id: rec for rec in live}
    out: dict[str, WorkerAssignment] = {}
    placements = result.placements()
    for w in ws:
        mine = tuple(placements.get(w.worker.id, ()))
        ids = sorted({p.topology for p in mine})
        out[w.worker.id] = WorkerAssignment(
            mine, {i: by_id[i].spec.to_dict() for i in ids},
            {i: by_id[i].lifecycle.spouts_emit for i in ids})
    return Plan(tuple(updates), tuple(removals), out, result.unassigned)
