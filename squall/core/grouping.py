"""Stream groupings: which partition(s) of an edge topic a tuple goes to.

Storm's groupings map to the producer's partition choice (docs/architecture.md,
"Contracts between services"):
shuffle and none round-robin, fields hashes the named fields, all copies to
every partition, global sends to partition 0, direct to the partition the
emitter names. The fields hash is stable across processes and machines
(CRC-32 of the values' canonical text), unlike Python's ``hash``.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.errors import TopologyError
from squall.core.topics import edge_topic

I64 = npt.NDArray[np.int64]


#: The stream a component emits on unless it names another (Storm's "default").
DEFAULT_STREAM = "default"

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


def fields_hash(values: Sequence[Any]) -> int:
    """Stable hash of grouping values: CRC-32 of their text, joined by a unit separator."""
    return zlib.crc32("\x1f".join(_text(v) for v in values).encode())


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def _hash_strings(values: list[str] | pa.Array) -> I64:
    """``fields_hash`` of one string field for many rows: each distinct value hashed once
    (grouping keys repeat: words, user ids), the same result as row by row."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    enc = arr.dictionary_encode()
    uniques = enc.dictionary.to_pylist()
    hashes = np.fromiter((zlib.crc32(u.encode()) for u in uniques), np.int64, len(uniques))
    out: I64 = hashes[enc.indices.to_numpy(zero_copy_only=False)]
    return out


@dataclass
class Router:
    """Partition choice for one edge; keeps the round-robin position of shuffle."""

    edge: Edge
    field_index: tuple[int, ...] = ()
    _next: int = field(default=0, init=False)

    @classmethod
    def for_edge(cls, edge: Edge, output_fields: Sequence[str]) -> Router:
        missing = [f for f in edge.fields if f not in output_fields]
        if missing:
            raise TopologyError(f"edge to {edge.target!r} groups by {missing}, not among the "
                                f"output fields {list(output_fields)}")
        return cls(edge, tuple(output_fields.index(f) for f in edge.fields))

    @property
    def needs_rows(self) -> bool:
        """Whether :meth:`route` looks at the rows' values (not just their number)."""
        return self.edge.grouping is Grouping.FIELDS

    def route(self, rows: Sequence[Sequence[Any]], direct: Sequence[int] | None = None) -> I64:
        """Target partition per row; for ALL, each row repeated once per partition."""
        if self.edge.grouping is not Grouping.FIELDS:
            return self.route_n(len(rows), direct)
        n, e, idx = len(rows), self.edge, self.field_index
        if len(idx) == 1 and n > 64:
            col = [r[idx[0]] for r in rows]
            if all(type(v) is str for v in col):
                return _hash_strings(col) % e.partitions
        return np.fromiter((fields_hash([r[i] for i in idx]) % e.partitions for r in rows),
                           np.int64, n)

    def route_columns(self, columns: dict[str, pa.Array], n: int) -> I64:
        """:meth:`route` for ``n`` rows given as output columns (a batch bolt's): one string
        field without nulls is hashed on its Arrow column, never as Python rows."""
        e = self.edge
        if e.grouping is not Grouping.FIELDS:
            return self.route_n(n)
        if len(e.fields) == 1:
            col = columns[e.fields[0]]
            if pa.types.is_string(col.type) and col.null_count == 0:
                return _hash_strings(col) % e.partitions
        keys = zip(*[columns[f].to_pylist() for f in e.fields], strict=True)
        return np.fromiter((fields_hash(k) % e.partitions for k in keys), np.int64, n)

    def route_n(self, n: int, direct: Sequence[int] | None = None) -> I64:
        """:meth:`route` for ``n`` rows of a grouping that does not look at values."""
        e, g = self.edge, self.edge.grouping
        if g is Grouping.FIELDS:
            raise TopologyError(f"edge to {e.target!r} groups by fields: route the rows")
        if g in (Grouping.SHUFFLE, Grouping.NONE):
            out = (np.arange(n, dtype=np.int64) + self._next) % e.partitions
            self._next = (self._next + n) % e.partitions
            return out
        if g is Grouping.GLOBAL:
            return np.zeros(n, np.int64)
        if g is Grouping.ALL:
            return np.tile(np.arange(e.partitions, dtype=np.int64), n)
        if direct is None:
            raise TopologyError(f"edge to {e.target!r} is direct: the emitter must name the task")
        out = np.asarray(direct, np.int64)
        if out.size and (out.min() < 0 or out.max() >= e.partitions):
            raise TopologyError(f"direct emit to a task outside 0..{e.partitions - 1}")
        return out


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
