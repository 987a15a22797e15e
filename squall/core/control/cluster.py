"""The control plane's records: what ZooKeeper holds for a topology, a worker and its
assignment, as values with their JSON forms (``squall.coord`` stores them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from squall.core.control.assignment import Kind, Placement, Worker
from squall.core.control.lifecycle import Lifecycle
from squall.core.topology.model import TopologySpec


def topology_id(name: str, counter: int, now_ms: int) -> str:
    """A submission's id, Storm's ``name-counter-timestamp``: unique for the cluster's life,
    so nothing of an earlier submission of the same name (topics, groups, checkpoints,
    state) is ever taken for this one's."""
    return f"{name}-{counter}-{now_ms // 1000}"


@dataclass(frozen=True)
class TopologyRecord:
    """A submitted topology. ``spec.name`` is its id (what its processes name topics,
    groups and checkpoints by); ``name`` the name it was submitted under."""

    id: str
    spec: TopologySpec
    lifecycle: Lifecycle
    submitted_ms: int
    version: int = -1  # the ZooKeeper node version it was read at
    name: str = ""  # "": the id (a record stored before ids were unique)

    @property
    def display_name(self) -> str:
        return self.name or self.id

    def to_json(self) -> bytes:
        return json.dumps({"id": self.id, "name": self.display_name,
                           "spec": self.spec.to_dict(), "lifecycle": self.lifecycle.to_dict(),
                           "submitted_ms": self.submitted_ms}).encode()

    @classmethod
    def from_json(cls, raw: bytes, version: int) -> TopologyRecord:
        d = json.loads(raw)
        return cls(d["id"], TopologySpec.from_dict(d["spec"]),
                   Lifecycle.from_dict(d["lifecycle"]), int(d["submitted_ms"]), version,
                   str(d.get("name") or d["id"]))


@dataclass(frozen=True)
class WorkerInfo:
    worker: Worker
    host: str
    pid: int
    started_ms: int
    # Metrics endpoints of the processes it runs: {"topology", "component", "kind", "url",
    # "tasks"}.
    endpoints: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    # Topologies whose processes it is still stopping (a teardown waits for them).
    stopping: tuple[str, ...] = ()
    # The ZooKeeper session it registered in: its assignment is written for that session.
    session: str = ""

    def to_json(self) -> bytes:
        return json.dumps({"id": self.worker.id, "kind": str(self.worker.kind),
                           "capacity": self.worker.capacity, "host": self.host, "pid": self.pid,
                           "started_ms": self.started_ms,
                           "endpoints": list(self.endpoints),
                           "stopping": list(self.stopping), "session": self.session}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> WorkerInfo:
        d = json.loads(raw)
        return cls(Worker(d["id"], Kind(d["kind"]), int(d["capacity"])), d["host"],
                   int(d["pid"]), int(d["started_ms"]), tuple(d.get("endpoints", ())),
                   tuple(str(t) for t in d.get("stopping", ())), str(d.get("session", "")))


@dataclass(frozen=True)
class WorkerAssignment:
    """What one worker runs: placements, each topology's spec, and whether its spouts emit;
    written for the worker's ZooKeeper ``session``. A worker runs only the assignment of the
    session it is registered in: one written before its session ended is stale (the leader
    may have given its units to others meanwhile), and the next one differs from it in
    ``session`` at least, so that the node changes and the worker hears of it."""

    placements: tuple[Placement, ...] = ()
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    active: dict[str, bool] = field(default_factory=dict)
    session: str = ""

    def to_json(self) -> bytes:
        return json.dumps({"placements": [p.to_dict() for p in self.placements],
                           "specs": self.specs, "active": self.active,
                           "session": self.session}, sort_keys=True).encode()

    @classmethod
    def from_json(cls, raw: bytes | None) -> WorkerAssignment:
        if not raw:
            return cls()
        d = json.loads(raw)
        return cls(tuple(Placement.from_dict(p) for p in d.get("placements", ())),
                   dict(d.get("specs", {})), dict(d.get("active", {})),
                   str(d.get("session", "")))
