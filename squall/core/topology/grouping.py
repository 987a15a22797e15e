"""Stream groupings: which partition(s) of an edge topic a tuple goes to.

Storm's groupings map to the producer's partition choice (docs/architecture.md,
"Contracts between services"): shuffle and none round-robin, fields hashes the
named fields, all copies to every partition, global sends to partition 0, direct
to the partition the emitter names. Local-or-shuffle round-robins over the emitter's
own tasks (the targets sharing its index modulo the emitter's parallelism: in a fused
chain they run in its Spark task), partial key sends a key to the less loaded of its
two candidate tasks (Storm's PartialKeyGrouping), custom asks the user's class
(docs/bolts.md, "Groupings"). This module is the declaration (a topology's edges);
:mod:`squall.core.topology.routing` makes the choice for rows, with NumPy and Arrow,
which a process that only reads topologies (a worker, the API) does not load.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

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
    LOCAL_OR_SHUFFLE = "local_or_shuffle"
    PARTIAL_KEY = "partial_key"
    CUSTOM = "custom"


#: Groupings that choose by the values of named fields.
KEYED = frozenset({Grouping.FIELDS, Grouping.PARTIAL_KEY})
#: ``module:Class``, as a custom grouping is named.
CLASS_NAME = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class CustomStreamGrouping:
    """A grouping of the user's own (Storm's ``CustomStreamGrouping``), named in a topology
    as ``grouping: custom`` with ``class: module:Class``. One instance per emitting task.

    Unlike Storm's ``chooseTasks``, it names one task per tuple: a record's tuples are
    counted before they are routed (the spout sends their ledger entry with them), so an
    edge sends each tuple a fixed number of times. A tuple for several tasks is ``all``
    grouping or one stream per target."""

    def prepare(self, source_task: int, stream: str, target_tasks: int) -> None:
        """Called once, before the first tuple: the emitting task, the stream, and the
        number of tasks to choose from (0..target_tasks-1)."""

    def choose_task(self, values: Sequence[Any]) -> int:
        """The task (0..target_tasks-1) that gets the tuple of ``values``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Edge:
    """A subscription: ``target`` reads ``stream`` of the source with this grouping."""

    target: str
    topic: str
    partitions: int
    grouping: Grouping = Grouping.SHUFFLE
    fields: tuple[str, ...] = ()
    stream: str = "default"
    #: the emitting component's tasks (where local-or-shuffle looks for an emitter's own)
    sources: int = 1
    #: a custom grouping's ``module:Class``
    grouping_class: str = ""

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise TopologyError(f"edge to {self.target!r}: partitions must be >= 1, "
                                f"got {self.partitions}")
        if self.sources < 1:
            raise TopologyError(f"edge to {self.target!r}: sources must be >= 1, "
                                f"got {self.sources}")
        if self.grouping in KEYED and not self.fields:
            raise TopologyError(f"edge to {self.target!r}: {self.grouping.value} grouping "
                                "needs field names")
        if self.grouping is Grouping.CUSTOM and not CLASS_NAME.match(self.grouping_class):
            raise TopologyError(f"edge to {self.target!r}: a custom grouping needs its "
                                f"class as 'module:Class', got {self.grouping_class!r}")

    @property
    def copies(self) -> int:
        """Tuples sent per emit on this edge."""
        return self.partitions if self.grouping is Grouping.ALL else 1


def check_subscription(where: str, component: str, grouping: Grouping, fields: Sequence[str],
                       grouping_class: str, output_fields: Sequence[str],
                       from_plain_bolt: bool) -> None:
    """A bolt's input (at ``where``) from ``component``, whose stream has
    ``output_fields``: its grouping's fields and class, or a TopologyError naming them."""
    if grouping in KEYED:
        missing = [f for f in fields if f not in output_fields] or (
            ["(none given)"] if not fields else [])
        if missing:
            raise TopologyError(
                f"{where}: {grouping.value} grouping on {component!r} by {missing}, not "
                f"among its output fields {list(output_fields)}")
    elif fields:
        raise TopologyError(f"{where}: {grouping.value} grouping on {component!r} takes no "
                            "fields (fields and partial_key do)")
    if (grouping is Grouping.CUSTOM) != bool(grouping_class):
        raise TopologyError(
            f"{where}: input from {component!r}: a custom grouping and only it names a class "
            f"(grouping {grouping.value!r}, class {grouping_class!r})")
    if grouping is Grouping.CUSTOM and not from_plain_bolt:
        raise TopologyError(
            f"{where}: a custom grouping takes a bolt's stream, not {component!r}'s: a "
            "spout's records and a stateful bolt's values are routed where a grouping that "
            "fails could only stop them")
    if grouping_class and not CLASS_NAME.match(grouping_class):
        raise TopologyError(f"{where}: input from {component!r}: grouping class "
                            f"{grouping_class!r} must be 'module:Class'")


def parse_edge(spec: str, topology: str, component: str, sources: int = 1) -> Edge:
    """``target:partitions[:grouping[:field,field | :module:Class]][@stream]``, e.g.
    ``count:4:fields:word`` or ``count:4:custom:my.groupings:ByLength``; ``sources``: the
    emitting component's tasks."""
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
    rest = ":".join(parts[3:])
    custom = rest if grouping is Grouping.CUSTOM else ""
    fields = () if custom else tuple(f for f in rest.split(",") if f)
    stream = stream or DEFAULT_STREAM
    return Edge(target, edge_topic(topology, component, stream, target), partitions, grouping,
                fields, stream, sources, custom)


def edge_flag(edge: Edge) -> str:
    """The ``--edge`` form of an edge (the inverse of :func:`parse_edge`)."""
    spec = f"{edge.target}:{edge.partitions}:{edge.grouping.value}"
    if edge.grouping_class:
        spec += ":" + edge.grouping_class
    elif edge.fields:
        spec += ":" + ",".join(edge.fields)
    return spec if edge.stream == DEFAULT_STREAM else f"{spec}@{edge.stream}"
