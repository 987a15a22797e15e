"""Tuple batches, the wire format of the edge topics (docs/decisions.md, "Wire formats").

One Arrow IPC stream per Kafka message: the declared fields as columns, plus ``__roots``
and ``__ids`` (list<uint64>: the tuple's anchors, root -> XOR of edge ids), and optionally
``__src`` (dictionary<int32, string>: the source partition, "topic:partition") and
``__off`` (int64: the offset) of the source message each tuple descends from, with
``__nth`` (uint32) and ``__by`` (uint64; absent: all 0) (the tuple's place in that message's
tree, squall/core/reliability/lineage.py; absent: a spout's tuples), what exact state needs
(squall/core/trident/applied.py); stream, source component and task in the schema
metadata, and, for a tick to a bolt fused behind its chain's head, that bolt.
:func:`decode_tuples` raises :class:`WireFormatError` (and nothing else) on a malformed
payload, naming what was wrong.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from squall.core.errors import WireFormatError
from squall.core.reliability.lineage import NO_NTH, paths_of
from squall.core.reliability.tuples import (
    DEFAULT_STREAM,
    SYSTEM_COMPONENT,
    TICK_STREAM,
    Fields,
    Tuple,
    TupleGroup,
)

_VERSION = 1
ROOTS_COL = "__roots"
IDS_COL = "__ids"
SRC_COL = "__src"
OFF_COL = "__off"
BY_COL = "__by"
NTH_COL = "__nth"
RESERVED = frozenset({ROOTS_COL, IDS_COL, SRC_COL, OFF_COL, BY_COL, NTH_COL})
_ANCHOR_TYPE = pa.list_(pa.uint64())
SRC_TYPE = pa.dictionary(pa.int32(), pa.string())
#: Each tuple's source message: (source partitions, offsets), dictionary-encoded names.
Origins = tuple[pa.DictionaryArray, npt.NDArray[np.int64]]
#: Each tuple's place in its message's tree: (emitted_by, nth), squall/core/reliability/lineage.py.
Lineage = tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]


# ----- tuple batches ------------------------------------------------------


@dataclass(frozen=True)
class TupleBatch:
    """Tuples of one stream from one source task, as an Arrow record batch."""

    data: pa.RecordBatch
    stream: str = DEFAULT_STREAM
    source: str = ""
    source_task: int = 0
    #: the bolt it is for when that is not its chain's head ("": the head), a tick to a bolt
    #: fused behind it (squall/core/topology/ticks.py)
    to: str = ""

    def __len__(self) -> int:
        return int(self.data.num_rows)

    @property
    def fields(self) -> Fields:
        return tuple(n for n in self.data.schema.names if n not in RESERVED)

    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, Any],
        anchors: Sequence[Mapping[int, int]],
        *,
        stream: str = DEFAULT_STREAM,
        source: str = "",
        source_task: int = 0,
        origins: Sequence[tuple[str, int] | None] | None = None,
        lineage: Sequence[tuple[int, int]] | None = None,
        lineage_columns: tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]] | None = None,
    ) -> TupleBatch:
        """``lineage``: each tuple's (emitted_by, nth), carried with its origin (or
        ``lineage_columns``: the same as two arrays)."""
        bad = RESERVED.intersection(columns)
        if bad:
            raise WireFormatError(f"field names {sorted(bad)} are reserved")
        n = len(anchors)
        arrays, names = [], []
        for name, col in columns.items():
            arr = col if isinstance(col, pa.Array) else pa.array(col)
            if len(arr) != n:
                raise WireFormatError(f"column {name!r} has {len(arr)} rows, anchors have {n}")
            arrays.append(arr)
            names.append(name)
        roots, ids = _anchor_columns(anchors)
        arrays += [roots, ids]
        names += [ROOTS_COL, IDS_COL]
        if origins is not None and any(o is not None for o in origins):
            arrays += [pa.array([o[0] if o else None for o in origins]).dictionary_encode(),
                       pa.array([o[1] if o else -1 for o in origins], pa.int64())]
            names += [SRC_COL, OFF_COL]
            if lineage is not None:
                lineage_columns = (np.fromiter((b for b, _ in lineage), np.uint64, n),
                                   np.fromiter((j for _, j in lineage), np.uint32, n))
            if lineage_columns is not None:
                arrays, names = _with_lineage(arrays, names, *lineage_columns)
        return cls(pa.RecordBatch.from_arrays(arrays, names=names), stream, source, source_task)

    @classmethod
    def from_tuples(
        cls,
        tuples: Sequence[Tuple],
        fields: Fields,
        *,
        stream: str = DEFAULT_STREAM,
        source: str = "",
        source_task: int = 0,
    ) -> TupleBatch:
        cols = {f: [t.values[i] for t in tuples] for i, f in enumerate(fields)}
        return cls.from_columns(cols, [t.anchors for t in tuples], stream=stream, source=source,
                                source_task=source_task, origins=[t.origin for t in tuples],
                                lineage=[(t.emitted_by, t.nth) for t in tuples])

    @classmethod
    def single_anchored(
        cls,
        columns: Mapping[str, pa.Array],
        roots: npt.NDArray[np.uint64] | None,
        ids: npt.NDArray[np.uint64] | None,
        *,
        stream: str = DEFAULT_STREAM,
        source: str = "",
        source_task: int = 0,
        origins: Origins | None = None,
        lineage: Lineage | None = None,
    ) -> TupleBatch:
        """Tuples with one anchor each straight from arrays; None: untracked. ``lineage``
        goes with ``origins`` (none: a spout's tuples)."""
        n = len(next(iter(columns.values()))) if columns else (0 if roots is None else len(roots))
        if roots is None or ids is None:
            off = pa.array(np.zeros(n + 1, np.int32))
            empty = pa.array(np.empty(0, np.uint64))
            r = i = pa.ListArray.from_arrays(off, empty)
        else:
            off = pa.array(np.arange(n + 1, dtype=np.int32))
            r = pa.ListArray.from_arrays(off, pa.array(roots, pa.uint64()))
            i = pa.ListArray.from_arrays(off, pa.array(ids, pa.uint64()))
        arrays, names = [*columns.values(), r, i], [*columns, ROOTS_COL, IDS_COL]
        if origins is not None:
            arrays += [origins[0], pa.array(origins[1], pa.int64())]
            names += [SRC_COL, OFF_COL]
            if lineage is not None:
                arrays, names = _with_lineage(arrays, names, *lineage)
        return cls(pa.RecordBatch.from_arrays(arrays, names=names), stream, source, source_task)

    def select(self, rows: npt.NDArray[np.intp]) -> TupleBatch:
        """The tuples at ``rows``, in that order."""
        return TupleBatch(self.data.take(pa.array(rows)), self.stream, self.source,
                          self.source_task, self.to)

    def lineage(self) -> Lineage:
        """Each tuple's (emitted_by, nth): (0, NO_NTH) where the batch carries none."""
        names = self.data.schema.names
        by = np.asarray(self.data.column(BY_COL).to_numpy(zero_copy_only=False), np.uint64) \
            if BY_COL in names else np.zeros(len(self), np.uint64)
        nth = np.asarray(self.data.column(NTH_COL).to_numpy(zero_copy_only=False), np.uint32) \
            if NTH_COL in names else np.full(len(self), NO_NTH, np.uint32)
        return by, nth

    def paths(self) -> npt.NDArray[np.uint64]:
        """Each tuple's path in its message's tree (0: a spout's tuple)."""
        if NTH_COL not in self.data.schema.names:
            return np.zeros(len(self), np.uint64)
        return paths_of(*self.lineage())

    def origins(self) -> Origins | None:
        """Each tuple's source message, if the batch carries them (offset -1, name null:
        unknown for that tuple)."""
        if SRC_COL not in self.data.schema.names:
            return None
        src = self.data.column(SRC_COL)
        off = np.asarray(self.data.column(OFF_COL).to_numpy(zero_copy_only=False), np.int64)
        return src, off

    def first_roots(self) -> npt.NDArray[np.uint64]:
        """Each tuple's first root (0 for an unanchored tuple): which emission of its source
        message it belongs to."""
        col = self.data.column(ROOTS_COL)
        lists = col if isinstance(col, pa.ListArray) else pa.concat_arrays(col.chunks)
        flat = np.asarray(lists.values.to_numpy(zero_copy_only=False), np.uint64)
        starts = np.asarray(lists.offsets.to_numpy(zero_copy_only=False), np.int64)
        has = starts[1:] > starts[:-1]
        out = np.zeros(len(lists), np.uint64)
        out[has] = flat[starts[:-1][has]]
        return out

    def all_roots(self) -> npt.NDArray[np.uint64]:
        """Every root the batch's tuples are anchored to, with repeats."""
        col = self.data.column(ROOTS_COL)
        lists = col if isinstance(col, pa.ListArray) else pa.concat_arrays(col.chunks)
        return np.asarray(lists.flatten().to_numpy(zero_copy_only=False), np.uint64)

    def anchors(self) -> list[dict[int, int]]:
        one = self._one_anchor_each()
        if one is not None:  # (most batches): no list per tuple
            return [{a: b} for a, b in zip(*one, strict=True)]
        flat_r, flat_i, bounds = self._anchor_lists()
        return [dict(zip(flat_r[lo:hi], flat_i[lo:hi], strict=True))
                for lo, hi in itertools.pairwise(bounds)]

    def _anchor_lists(self) -> tuple[list[int], list[int], list[int]]:
        """Every tuple's roots and anchor ids, flat, and where each tuple's begin (one
        more bound than tuples)."""
        r, i, starts = self._anchor_arrays()
        return (r.values.to_numpy(zero_copy_only=False)[starts[0]:starts[-1]].tolist(),
                i.flatten().to_numpy(zero_copy_only=False).tolist(),
                (starts - starts[0]).tolist())

    def _anchor_arrays(self) -> tuple[pa.ListArray, pa.ListArray, npt.NDArray[np.int64]]:
        """The roots and ids list columns as single arrays, and the roots' offsets."""
        roots, ids = self.data.column(ROOTS_COL), self.data.column(IDS_COL)
        r = roots if isinstance(roots, pa.ListArray) else pa.concat_arrays(roots.chunks)
        i = ids if isinstance(ids, pa.ListArray) else pa.concat_arrays(ids.chunks)
        return r, i, np.asarray(r.offsets.to_numpy(zero_copy_only=False), np.int64)

    def _one_anchor_each(self) -> tuple[list[int], list[int]] | None:
        """Each tuple's one root and anchor id, if every tuple has exactly one."""
        r, i, starts = self._anchor_arrays()
        if starts[-1] - starts[0] != len(r) or not (starts[1:] - starts[:-1] == 1).all():
            return None
        return (r.values.to_numpy(zero_copy_only=False)[starts[0]:starts[-1]].tolist(),
                i.flatten().to_numpy(zero_copy_only=False).tolist())

    def tuples(self) -> list[Tuple]:
        fields = self.fields
        o = self.origins()
        by, nth = self.lineage()
        one = self._one_anchor_each()
        group = TupleGroup(fields, self.stream, self.source, self.source_task,
                           [self.data.column(f).to_pylist() for f in fields], by.tolist(),
                           nth.tolist(), None if o is None else (lambda: _origin_list(o)),
                           *(one or self._anchor_lists()))
        return Tuple.of_group(group, len(self))


def tick_batch(freq_s: float, to: str = "") -> TupleBatch:
    """A tick tuple (squall/core/topology/ticks.py): its interval as its one value, from
    Storm's ``__system`` component, task -1, anchored to nothing; ``to``: the fused bolt it
    is for ("": its chain's head)."""
    tick = TupleBatch.from_columns({"freq_secs": pa.array([freq_s], pa.float64())}, [{}],
                                   stream=TICK_STREAM, source=SYSTEM_COMPONENT, source_task=-1)
    return TupleBatch(tick.data, tick.stream, tick.source, tick.source_task, to)


def _with_lineage(arrays: list[Any], names: list[str], by: npt.NDArray[np.uint64],
                  nth: npt.NDArray[np.uint32]) -> tuple[list[Any], list[str]]:
    """The lineage columns where they say something: ``__nth`` unless every tuple is a
    spout's, ``__by`` unless all 0 (the first bolt's output)."""
    if (nth == NO_NTH).all():
        return arrays, names
    if by.any():
        arrays, names = [*arrays, pa.array(by, pa.uint64())], [*names, BY_COL]
    return [*arrays, pa.array(nth, pa.uint32())], [*names, NTH_COL]


def _origin_list(o: Origins) -> list[tuple[str, int] | None]:
    """``(source partition, offset)`` per tuple, through the dictionary's few names (its
    ``to_pylist`` decodes each row on its own: a tenth of a per-tuple bolt's time)."""
    src = o[0].combine_chunks() if isinstance(o[0], pa.ChunkedArray) else o[0]
    names = src.dictionary.to_pylist()
    idx = pc.fill_null(src.indices, -1).to_numpy(zero_copy_only=False).tolist()
    return [None if i < 0 else (names[i], off)
            for i, off in zip(idx, o[1].tolist(), strict=True)]


_values = operator.methodcaller("values")


def _anchor_columns(anchors: Sequence[Mapping[int, int]]) -> tuple[pa.Array, pa.Array]:
    offsets = np.zeros(len(anchors) + 1, np.int32)
    np.cumsum(np.fromiter(map(len, anchors), np.int32, len(anchors)), out=offsets[1:])
    # the dicts' keys and values chained in C: no Python frame per anchor
    flat_roots = np.fromiter(itertools.chain.from_iterable(anchors), np.uint64, int(offsets[-1]))
    flat_ids = np.fromiter(itertools.chain.from_iterable(map(_values, anchors)), np.uint64,
                           int(offsets[-1]))
    off = pa.array(offsets, pa.int32())
    return (pa.ListArray.from_arrays(off, pa.array(flat_roots, pa.uint64())),
            pa.ListArray.from_arrays(off, pa.array(flat_ids, pa.uint64())))


def encode_tuples(batch: TupleBatch) -> bytes:
    meta = {
        b"squall.stream": batch.stream.encode(),
        b"squall.source": batch.source.encode(),
        b"squall.source_task": str(batch.source_task).encode(),
        b"squall.version": str(_VERSION).encode(),
    }
    if batch.to:
        meta[b"squall.to"] = batch.to.encode()
    data = batch.data.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_batch(data)
    return bytes(sink.getvalue())


#: Encoded messages stay under Kafka's default 1 MiB message size.
MAX_MESSAGE_BYTES = 900_000


def encode_tuples_chunked(batch: TupleBatch, max_bytes: int = MAX_MESSAGE_BYTES) -> list[bytes]:
    """One or more messages, each under ``max_bytes`` (split by rows; a single huge row is
    sent alone and left to the broker to judge)."""
    raw = encode_tuples(batch)
    n = len(batch)
    if len(raw) <= max_bytes or n <= 1:
        return [raw]
    half = _split_point(batch)
    if half is None:
        return [raw]
    parts = (dataclasses.replace(batch, data=batch.data.slice(0, half)),
             dataclasses.replace(batch, data=batch.data.slice(half)))
    return [m for p in parts for m in encode_tuples_chunked(p, max_bytes)]


def _split_point(batch: TupleBatch) -> int | None:
    """Where to cut an oversized batch: near its middle, but never between two tuples of
    one source message (exact state applies a message's tuples for a task together: they
    must reach it in one Kafka record). None: it is one message's tuples."""
    n, o = len(batch), batch.origins()
    if o is None:
        return n // 2
    src = np.asarray(o[0].indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    cuts = np.flatnonzero((o[1][1:] != o[1][:-1]) | (src[1:] != src[:-1])) + 1
    if not cuts.size:
        return None
    return int(cuts[np.argmin(np.abs(cuts - n // 2))])


def decode_tuples(payload: bytes) -> TupleBatch:
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(payload))
        batches = list(reader)
        schema = reader.schema
    except (pa.ArrowException, OSError, ValueError) as e:
        raise WireFormatError(f"tuple batch: not an Arrow IPC stream ({e})") from None
    if len(batches) != 1:
        raise WireFormatError(f"tuple batch: expected 1 record batch, found {len(batches)}")
    data = batches[0]
    for col in (ROOTS_COL, IDS_COL):
        idx = schema.get_field_index(col)
        if idx < 0:
            raise WireFormatError(f"tuple batch: column {col!r} is missing")
        if schema.field(idx).type != _ANCHOR_TYPE:
            raise WireFormatError(
                f"tuple batch: column {col!r} is {schema.field(idx).type}, expected {_ANCHOR_TYPE}"
            )
    roots, ids = data.column(ROOTS_COL), data.column(IDS_COL)
    if roots.null_count or ids.null_count or not roots.offsets.equals(ids.offsets):
        raise WireFormatError("tuple batch: __roots and __ids do not pair up row by row")
    have = {c: schema.field(c).type for c in (SRC_COL, OFF_COL) if c in schema.names}
    if have and have != {SRC_COL: SRC_TYPE, OFF_COL: pa.int64()}:
        raise WireFormatError(f"tuple batch: origin columns {have}, expected {SRC_COL} "
                              f"{SRC_TYPE} and {OFF_COL} int64 together")
    lin = {c: schema.field(c).type for c in (BY_COL, NTH_COL) if c in schema.names}
    if lin and (not have or lin.get(NTH_COL) != pa.uint32() or
                lin.get(BY_COL, pa.uint64()) != pa.uint64()):
        raise WireFormatError(f"tuple batch: lineage columns {lin}, expected {NTH_COL} "
                              f"uint32 (and {BY_COL} uint64), with the origin columns")
    meta = schema.metadata or {}
    try:
        task = int(meta.get(b"squall.source_task", b"0"))
        stream = meta.get(b"squall.stream", DEFAULT_STREAM.encode()).decode()
        source = meta.get(b"squall.source", b"").decode()
        to = meta.get(b"squall.to", b"").decode()
    except (ValueError, UnicodeDecodeError) as e:
        raise WireFormatError(f"tuple batch: bad metadata ({e})") from None
    return TupleBatch(data.replace_schema_metadata(None), stream, source, task, to)
