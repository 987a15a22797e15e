"""Task assignment: spread a topology's tasks evenly over the workers that can run them.

A *unit* is what one worker slot runs: a spout task, an acker task, or a bolt
component (a bolt's tasks are the input partitions of its Spark query, so the
component is the unit a bolts worker takes). Units go to workers of their kind
by Storm's even scheduler, made sticky: a unit stays where it runs while that
worker lives and is not over its fair share, so a rebalance or a lost worker
moves only the units it must. Pure: no ZooKeeper here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from squall.core.topology.model import TopologySpec

ACKER = "__acker"


class Kind(StrEnum):
    SPOUT = "spout"
    ACKER = "acker"
    BOLTS = "bolts"


@dataclass(frozen=True, order=True)
class Unit:
    topology: str  # the topology id
    kind: Kind
    component: str
    task: int

    @property
    def key(self) -> str:
        return f"{self.topology}/{self.component}/{self.task}"


@dataclass(frozen=True)
class Worker:
    id: str
    kind: Kind
    capacity: int  # units it can run at once


@dataclass(frozen=True)
class Placement:
    """What a worker runs for one component of one topology: a process per placement."""

    topology: str
    kind: Kind
    component: str
    tasks: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"topology": self.topology, "kind": str(self.kind), "component": self.component,
                "tasks": list(self.tasks)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Placement:
        return cls(str(d["topology"]), Kind(d["kind"]), str(d["component"]),
                   tuple(int(t) for t in d["tasks"]))


def units_of(topology_id: str, spec: TopologySpec) -> list[Unit]:
    """Every unit of a topology: spout tasks, acker tasks, one unit per bolt component."""
    out = [Unit(topology_id, Kind.SPOUT, s.name, t) for s in spec.spouts
           for t in range(s.parallelism)]
    out += [Unit(topology_id, Kind.ACKER, ACKER, t) for t in range(spec.ackers)]
    out += [Unit(topology_id, Kind.BOLTS, b.name, 0) for b in spec.bolts]
    return out


@dataclass(frozen=True)
class Assignment:
    where: dict[Unit, str]  # unit -> worker id
    unassigned: tuple[Unit, ...]

    def placements(self) -> dict[str, list[Placement]]:
        """Per worker: its units grouped by (topology, component)."""
        grouped: dict[str, dict[tuple[str, Kind, str], list[int]]] = defaultdict(
            lambda: defaultdict(list))
        for u, w in sorted(self.where.items()):
            grouped[w][(u.topology, u.kind, u.component)].append(u.task)
        return {w: [Placement(t, k, c, tuple(tasks)) for (t, k, c), tasks in g.items()]
                for w, g in grouped.items()}


def assign(units: Iterable[Unit], workers: Iterable[Worker],
           previous: Mapping[Unit, str] | None = None) -> Assignment:
    """Balanced and sticky; units beyond the workers' total capacity stay unassigned."""
    previous = previous or {}
    by_kind: dict[Kind, list[Unit]] = defaultdict(list)
    for u in sorted(set(units)):
        by_kind[u.kind].append(u)
    pool: dict[Kind, list[Worker]] = defaultdict(list)
    for w in sorted(workers, key=lambda w: w.id):
        pool[w.kind].append(w)
    where: dict[Unit, str] = {}
    unassigned: list[Unit] = []
    for kind, us in by_kind.items():
        ws = pool.get(kind, [])
        if not ws:
            unassigned += us
            continue
        share = math.ceil(len(us) / len(ws))
        cap = {w.id: w.capacity for w in ws}
        load = dict.fromkeys(cap, 0)
        rest = []
        for u in us:  # keep what runs where it runs, up to the fair share
            had = previous.get(u)
            if had is not None and had in load and load[had] < min(share, cap[had]):
                where[u] = had
                load[had] += 1
            else:
                rest.append(u)
        for u in rest:  # the rest to the least-loaded worker with room (ties by id)
            free = [w for w in load if load[w] < cap[w]]
            if not free:
                unassigned.append(u)
                continue
            best = min(free, key=lambda w: (load[w], w))
            where[u] = best
            load[best] += 1
    return Assignment(where, tuple(unassigned))
