"""Stream groupings: which partition(s) of an edge topic a tuple goes to.

Storm's groupings map to the producer's partition choice (docs/architecture.md,
"Contracts between services"): shuffle and none round-robin, fields hashes the
named fields, all copies to every partition, global sends to partition 0, direct
to the partition the emitter names. This module is the declaration (a topology's
edges); :mod:`squall.core.topology.routing` makes the choice for rows, with NumPy and Arrow,
which a process that only reads topologies (a worker, the API) does not load.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from squall.core.errors import TopologyError
from squall.core.reliability.tuples import DEFAULT_STREAM
from squall.core.topology.topics import edge_topic


class Grouping(StrEnum):
    SHUFFLE = "shuffle"
    FIELDS = "fields"
    ALL = "all"
    GLOBAL = "global"
    DIRECT = "direct"
    NONE = "none"


@dataclass(frozen=True)
class Edge:
    """A subscription: ``target`` reads ``stream`` of the source with this grouping."""

    target: str
    topic: str
    partitions: int
    grouping: Grouping = Grouping.SHUFFLE
    fields: tuple[str, ...] = ()
    stream: str = "default"

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise TopologyError(f"edge to {self.target!r}: partitions must be >= 1, "
                                f"got {self.partitions}")
        if self.grouping is Grouping.FIELDS and not self.fields:
            raise TopologyError(f"edge to {self.target!r}: fields grouping needs field names")

    @property
    def copies(self) -> int:
        """Tuples sent per emit on this edge."""
        return self.partitions if self.grouping is Grouping.ALL else 1


def parse_edge(spec: str, topology: str, component: str) -> Edge:
    """``target:partitions[:grouping[:field,field]][@stream]``, e.g. ``count:4:fields:word``."""
    body, _, stream = spec.partition("@")
    parts = body.split(":")
    if len(parts) < 2:
        raise TopologyError(f"edge {spec!r}: expected target:partitions[:grouping[:fields]]")
    target, n = parts[0], parts[1]
    try:
        partitions = int(n)
    except ValueError:
        raise TopologyError(f"edge {spec!r}: partitions {n!r} is not a number") from None
    try:
        grouping = Grouping(parts[2]) if len(parts) > 2 else Grouping.SHUFFLE
    except ValueError:
        raise TopologyError(f"edge {spec!r}: unknown grouping {parts[2]!r} "
                            f"(one of {', '.join(g.value for g in Grouping)})") from None
    fields = tuple(f for f in parts[3].split(",") if f) if len(parts) > 3 else ()
    stream = stream or DEFAULT_STREAM
    return Edge(target, edge_topic(topology, component, stream, target), partitions, grouping,
                fields, stream)


def edge_flag(edge: Edge) -> str:
    """The ``--edge`` form of an edge (the inverse of :func:`parse_edge`)."""
    spec = f"{edge.target}:{edge.partitions}:{edge.grouping.value}"
    if edge.fields:
        spec += ":" + ",".join(edge.fields)
    return spec if edge.stream == DEFAULT_STREAM else f"{spec}@{edge.stream}"
