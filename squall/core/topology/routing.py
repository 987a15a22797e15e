"""Routing: the partition of an edge topic each emitted row goes to, by its grouping.

The fields hash is stable across processes and machines (CRC-32 of the values'
canonical text), unlike Python's ``hash``. Partial key grouping's second choice hashes
the same text with BLAKE2b: a CRC of the text under another seed differs from the first
by a constant, so keys that share a first task would share the second too. The
groupings themselves are declared in :mod:`squall.core.topology.grouping`.
"""

from __future__ import annotations

import hashlib
import importlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.errors import TopologyError
from squall.core.topology.grouping import KEYED, CustomStreamGrouping, Edge, Grouping

I64 = npt.NDArray[np.int64]


def fields_hash(values: Sequence[Any]) -> int:
    """Stable hash of grouping values: CRC-32 of their text, joined by a unit separator."""
    return zlib.crc32("\x1f".join(_text(v) for v in values).encode())


def second_hash(values: Sequence[Any]) -> int:
    """Partial key grouping's second, independent hash of the same values."""
    return _blake("\x1f".join(_text(v) for v in values))


def _blake(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def _hash_strings(values: list[str] | pa.Array,
                  hash_: Callable[[str], int] = lambda u: zlib.crc32(u.encode())) -> I64:
    """``fields_hash`` (or ``hash_``) of one string field for many rows: each distinct value
    hashed once (grouping keys repeat: words, user ids), the same result as row by row."""
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.string())
    enc = arr.dictionary_encode()
    uniques = enc.dictionary.to_pylist()
    hashes = np.fromiter((hash_(u) for u in uniques), np.int64, len(uniques))
    out: I64 = hashes[enc.indices.to_numpy(zero_copy_only=False)]
    return out


def _candidates_strings(values: list[str] | pa.Array, n: int) -> tuple[I64, I64]:
    """Both partial-key candidates of one string field."""
    return _hash_strings(values) % n, _hash_strings(values, _blake) % n


def load_grouping(edge: Edge, task: int) -> CustomStreamGrouping:
    """``edge``'s custom grouping, prepared for emitting task ``task``."""
    mod, _, name = edge.grouping_class.partition(":")
    try:
        cls = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise TopologyError(f"edge to {edge.target!r}: custom grouping "
                            f"{edge.grouping_class!r} cannot be loaded: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, CustomStreamGrouping)):
        raise TopologyError(f"edge to {edge.target!r}: {edge.grouping_class!r} is not a "
                            "squall.topology.CustomStreamGrouping")
    g = cls()
    g.prepare(task, edge.stream, edge.partitions)
    return g


@dataclass
class Router:
    """Partition choice for one edge of one emitting task; keeps the round-robin position
    of shuffle and the loads partial key grouping balances (what this task sent each)."""

    edge: Edge
    field_index: tuple[int, ...] = ()
    task: int = 0
    custom: CustomStreamGrouping | None = None
    _next: int = field(default=0, init=False)
    _load: list[int] = field(init=False)
    _local: I64 = field(init=False)

    def __post_init__(self) -> None:
        e = self.edge
        self._load = [0] * e.partitions
        m, n, i = e.sources, e.partitions, self.task % e.sources
        self._local = np.arange(i, n, m, dtype=np.int64) if n >= m \
            else np.array([i % n], np.int64)

    @classmethod
    def for_edge(cls, edge: Edge, output_fields: Sequence[str], task: int = 0) -> Router:
        """The router of emitting task ``task``."""
        missing = [f for f in edge.fields if f not in output_fields]
        if missing:
            raise TopologyError(f"edge to {edge.target!r} groups by {missing}, not among the "
                                f"output fields {list(output_fields)}")
        custom = load_grouping(edge, task) if edge.grouping is Grouping.CUSTOM else None
        return cls(edge, tuple(output_fields.index(f) for f in edge.fields), task, custom)

    @property
    def needs_rows(self) -> bool:
        """Whether :meth:`route` looks at the rows' values (not just their number)."""
        return self.edge.grouping in KEYED or self.custom is not None

    def route(self, rows: Sequence[Sequence[Any]], direct: Sequence[int] | None = None) -> I64:
        """Target partition per row; for ALL, each row repeated once per partition."""
        if self.custom is not None:
            return self._chosen(rows)
        if self.edge.grouping is Grouping.PARTIAL_KEY:
            idx = self.field_index
            if len(idx) == 1 and all(type(r[idx[0]]) is str for r in rows):
                return self._least_loaded(*_candidates_strings([r[idx[0]] for r in rows],
                                                               self.edge.partitions))
            keys = [[r[i] for i in idx] for r in rows]
            return self._least_loaded(*self._candidates(keys))
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
        if e.grouping is Grouping.PARTIAL_KEY:
            if len(e.fields) == 1:
                col = columns[e.fields[0]]
                if pa.types.is_string(col.type) and col.null_count == 0:
                    return self._least_loaded(*_candidates_strings(col, e.partitions))
            pk = [list(k) for k in zip(*[columns[f].to_pylist() for f in e.fields],
                                       strict=True)]
            return self._least_loaded(*self._candidates(pk))
        if self.custom is not None:
            return self._chosen(list(zip(*[c.to_pylist() for c in columns.values()],
                                         strict=True)))
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
        if g in KEYED or g is Grouping.CUSTOM:
            raise TopologyError(f"edge to {e.target!r} groups by values: route the rows")
        if g is Grouping.LOCAL_OR_SHUFFLE:
            local = self._local
            out = local[(np.arange(n, dtype=np.int64) + self._next) % local.size]
            self._next = (self._next + n) % local.size
            return out
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

    def _candidates(self, keys: Sequence[Sequence[Any]]) -> tuple[I64, I64]:
        n = self.edge.partitions
        first = np.fromiter((fields_hash(k) % n for k in keys), np.int64, len(keys))
        second = np.fromiter((second_hash(k) % n for k in keys), np.int64, len(keys))
        return first, second

    def _least_loaded(self, first: I64, second: I64) -> I64:
        """Each row to the candidate this task has sent fewer tuples to so far (the first
        on a tie), counting as it goes: Storm's two choices."""
        load = self._load
        out = []
        for a, b in zip(first.tolist(), second.tolist(), strict=True):
            p = b if load[b] < load[a] else a
            load[p] += 1
            out.append(p)
        return np.array(out, np.int64)

    def choose(self, values: Sequence[Any]) -> int:
        """The custom grouping's task for one tuple; a :class:`TopologyError` naming the
        grouping and the values if it fails or names no task of the target."""
        assert self.custom is not None
        n, e = self.edge.partitions, self.edge
        try:
            p = self.custom.choose_task(values)
        except Exception as ex:  # user code: the caller fails the tuple's tree
            raise TopologyError(f"custom grouping {e.grouping_class!r} failed on "
                                f"{list(values)!r}: {type(ex).__name__}: {ex}") from ex
        if not (isinstance(p, int) and 0 <= p < n):
            raise TopologyError(f"custom grouping {e.grouping_class!r} chose task {p!r} "
                                f"for {list(values)!r}: the tasks of {e.target!r} are "
                                f"0..{n - 1}")
        return p

    def _chosen(self, rows: Sequence[Sequence[Any]]) -> I64:
        return np.fromiter((self.choose(r) for r in rows), np.int64, len(rows))
