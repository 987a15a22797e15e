"""What killing a topology removes, and when.

Storm's Nimbus removes a killed topology once its kill wait is over; its supervisors kill
the workers, and what the topology kept is cleaned up after. Here, at the end of the
wait, the leader removes the topology's record (its name is free again: a new
submission is a new id, squall/core/control/cluster.py) and queues a teardown. Once no worker
runs a process of it any more, the leader deletes what belongs only to that id:

- its internal topics, ``squall.<id>.*`` (acker, results, edges, the bolts' reports);
- its consumer groups, ``squall.<id>.*`` (the spouts', the ackers', the report readers');

and each worker deletes its checkpoints of it when it stops its processes. Kept, unless
the kill asked to purge them: the dead-letter topic (the messages that could not be
processed are the user's to read) and the topology's Trident state (the user's data;
the bolts workers purge it). A state named in the spec (``state: {name: ...}``) belongs to
that name, not to the id, and is never purged.

Pure: the broker's topics and groups and the workers' processes are passed in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.core.control.cluster import WorkerAssignment, WorkerInfo
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import dlq_replays_topic, dlq_topic

#: Where each spout's group had committed: component -> topic -> partition -> next offset.
SourceOffsets = Mapping[str, Mapping[str, Mapping[int, int]]]


@dataclass(frozen=True)
class Teardown:
    """A killed topology's teardown: queued at ``since_ms``, done at ``done_ms``."""

    id: str
    name: str
    since_ms: int
    done_ms: int | None = None
    topics: tuple[str, ...] = ()  # removed
    groups: tuple[str, ...] = ()  # removed
    kept: tuple[str, ...] = ()
    #: the last attempt's trouble (the broker did not answer...); tried again next round
    error: str = ""
    #: the kill asked for the state and dead letters to go too
    purge_state: bool = False
    #: the killed spec: what a resubmission that keeps its state is checked against
    spec: TopologySpec | None = None
    #: where its spouts' groups had committed, read before they were deleted
    offsets: SourceOffsets = field(default_factory=dict)

    @property
    def state_id(self) -> str:
        """The id that names the topology's state (an earlier one's, if it kept that)."""
        return self.spec.state_id if self.spec is not None else self.id

    def to_json(self) -> bytes:
        d: dict[str, Any] = {
            "id": self.id, "name": self.name, "since_ms": self.since_ms,
            "done_ms": self.done_ms, "topics": self.topics, "groups": self.groups,
            "kept": self.kept, "error": self.error, "purge_state": self.purge_state,
            "spec": None if self.spec is None else self.spec.to_dict(),
            "offsets": {c: {t: {str(p): o for p, o in ps.items()} for t, ps in ts.items()}
                        for c, ts in self.offsets.items()}}
        return json.dumps(d).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Teardown:
        d = json.loads(raw)
        spec = d.get("spec")
        return cls(str(d["id"]), str(d.get("name") or d["id"]), int(d["since_ms"]),
                   d.get("done_ms"), tuple(d.get("topics", ())), tuple(d.get("groups", ())),
                   tuple(d.get("kept", ())), str(d.get("error", "")),
                   bool(d.get("purge_state", False)),
                   None if spec is None else TopologySpec.from_dict(spec),
                   {str(c): {str(t): {int(p): int(o) for p, o in ps.items()}
                             for t, ps in ts.items()}
                    for c, ts in (d.get("offsets") or {}).items()})

    def summary(self) -> str:
        """What was removed and kept, in a sentence."""
        if self.done_ms is None:
            return f"{self.id}: waiting for its processes to stop" + (
                f" ({self.error})" if self.error else "")
        state = "its state is purged by the bolts workers" if self.purge_state \
            else "its state stays"
        return (f"{self.id}: removed {len(self.topics)} topics ({', '.join(self.topics)}) and "
                f"{len(self.groups)} consumer groups ({', '.join(self.groups)}); kept "
                f"{', '.join(self.kept) or 'nothing'}; {state}")


def prunable(teardowns: Iterable[Teardown], keep: int) -> list[Teardown]:
    """The done teardowns beyond the newest ``keep``, but for the newest of each state that
    stays: a resubmission may keep that state (squall/core/control/kept_state.py) from its
    record."""
    done = sorted((t for t in teardowns if t.done_ms is not None), key=lambda t: t.since_ms)
    last = {t.state_id: t for t in done if not t.purge_state}
    return [t for t in done[:max(0, len(done) - keep)] if last.get(t.state_id) is not t]


def prefix(topology_id: str) -> str:
    return f"squall.{topology_id}."


def owned(topology_id: str, topics: Iterable[str], groups: Iterable[str],
          purge_state: bool = False) -> tuple[list[str], list[str], list[str]]:
    """``(topics to remove, groups to remove, topics kept)`` of the broker's."""
    p, dlq = prefix(topology_id), dlq_topic(topology_id)
    mine = sorted(t for t in topics if t.startswith(p))
    keep = [] if purge_state else [dlq, dlq_replays_topic(topology_id)]
    return ([t for t in mine if t not in keep], sorted(g for g in groups if g.startswith(p)),
            [t for t in mine if t in keep])


def still_running(topology_id: str, workers: Iterable[WorkerInfo],
                  assignments: Iterable[WorkerAssignment]) -> bool:
    """Whether a worker still runs, stops or is assigned a process of the topology."""
    return any(e.get("topology") == topology_id for w in workers for e in w.endpoints) or \
        any(topology_id in w.stopping for w in workers) or \
        any(p.topology == topology_id for a in assignments for p in a.placements)
