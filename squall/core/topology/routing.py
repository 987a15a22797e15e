"""Routing: the partition of an edge topic each emitted row goes to, by its grouping.

The fields hash is stable across processes and machines (CRC-32 of the values'
canonical text), unlike Python's ``hash``. The groupings themselves are declared in
:mod:`squall.core.topology.grouping`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.errors import TopologyError
from squall.core.topology.grouping import Edge, Grouping

I64 = npt.NDArray[np.int64]


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
