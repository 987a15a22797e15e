"""Wire formats of the internal topics (docs/decisions.md, "Wire formats").

- tuple batches (edge topics): one Arrow IPC stream per Kafka message: the
  declared fields as columns, plus ``__roots`` and ``__ids`` (list<uint64>:
  the tuple's anchors, root -> XOR of edge ids); stream, source component and
  task in the schema metadata;
- acker batches (``squall.<topo>.acker``): a 24-byte header then packed
  little-endian columns root u64, value u64, task u16, kind u8;
- result batches (``squall.<topo>.results``): header then root u64,
  task u16, outcome u8, latency_ms u32;
- dead letters: the original key and value, the reason in headers.

Every decoder raises :class:`WireFormatError` (and nothing else) on a
malformed payload, naming what was wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.errors import WireFormatError
from squall.core.grouping import DEFAULT_STREAM
from squall.core.ids import TOMBSTONE, acker_partitions
from squall.core.records import MAX_TASK, AckerBatch, Outcome, RecordKind, Results
from squall.core.tuples import Fields, Tuple

ROOTS_COL = "__roots"
IDS_COL = "__ids"
RESERVED = frozenset({ROOTS_COL, IDS_COL})
_ANCHOR_TYPE = pa.list_(pa.uint64())

_HEADER = struct.Struct("<4sBBHIqI")  # magic, version, flags, reserved, count, ts_ms, reserved
_ACKER_MAGIC = b"SQAK"
_RESULT_MAGIC = b"SQRS"
_VERSION = 1
_ACKER_ROW = 8 + 8 + 2 + 1
_RESULT_ROW = 8 + 2 + 1 + 4


# ----- tuple batches ------------------------------------------------------


@dataclass(frozen=True)
class TupleBatch:
    """Tuples of one stream from one source task, as an Arrow record batch."""

    data: pa.RecordBatch
    stream: str = DEFAULT_STREAM
    source: str = ""
    source_task: int = 0

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
    ) -> TupleBatch:
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
        data = pa.RecordBatch.from_arrays([*arrays, roots, ids], names=[*names, ROOTS_COL, IDS_COL])
        return cls(data, stream, source, source_task)

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
                                source_task=source_task)

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
    ) -> TupleBatch:
        """Tuples with one anchor each (spout tuples) straight from arrays; None: untracked."""
        n = len(next(iter(columns.values()))) if columns else (0 if roots is None else len(roots))
        if roots is None or ids is None:
            off = pa.array(np.zeros(n + 1, np.int32))
            empty = pa.array(np.empty(0, np.uint64))
            r = i = pa.ListArray.from_arrays(off, empty)
        else:
            off = pa.array(np.arange(n + 1, dtype=np.int32))
            r = pa.ListArray.from_arrays(off, pa.array(roots, pa.uint64()))
            i = pa.ListArray.from_arrays(off, pa.array(ids, pa.uint64()))
        data = pa.RecordBatch.from_arrays([*columns.values(), r, i],
                                          names=[*columns, ROOTS_COL, IDS_COL])
        return cls(data, stream, source, source_task)

    def anchors(self) -> list[dict[int, int]]:
        roots = self.data.column(ROOTS_COL).to_pylist()
        ids = self.data.column(IDS_COL).to_pylist()
        return [dict(zip(r, i, strict=True)) for r, i in zip(roots, ids, strict=True)]

    def tuples(self) -> list[Tuple]:
        fields = self.fields
        cols = [self.data.column(f).to_pylist() for f in fields]
        return [
            Tuple(vals, fields, anc, stream=self.stream, source=self.source,
                  source_task=self.source_task)
            for vals, anc in zip(zip(*cols, strict=True) if cols else [()] * len(self),
                                 self.anchors(), strict=True)
        ]


def _anchor_columns(anchors: Sequence[Mapping[int, int]]) -> tuple[pa.Array, pa.Array]:
    offsets = np.zeros(len(anchors) + 1, np.int32)
    np.cumsum([len(a) for a in anchors], out=offsets[1:])
    flat_roots = np.fromiter((r for a in anchors for r in a), np.uint64, int(offsets[-1]))
    flat_ids = np.fromiter((e for a in anchors for e in a.values()), np.uint64, int(offsets[-1]))
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
    data = batch.data.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_batch(data)
    return bytes(sink.getvalue())


#: Encoded messages stay under Kafka's default 1 MiB message size.
MAX_MESSAGE_BYTES = 900_000
MAX_ACKER_RECORDS = 40_000  # 19 bytes each


def encode_tuples_chunked(batch: TupleBatch, max_bytes: int = MAX_MESSAGE_BYTES) -> list[bytes]:
    """One or more messages, each under ``max_bytes`` (split by rows; a single huge row is
    sent alone and left to the broker to judge)."""
    raw = encode_tuples(batch)
    n = len(batch)
    if len(raw) <= max_bytes or n <= 1:
        return [raw]
    half = n // 2
    parts = (TupleBatch(batch.data.slice(0, half), batch.stream, batch.source, batch.source_task),
             TupleBatch(batch.data.slice(half), batch.stream, batch.source, batch.source_task))
    return [m for p in parts for m in encode_tuples_chunked(p, max_bytes)]


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
    meta = schema.metadata or {}
    try:
        task = int(meta.get(b"squall.source_task", b"0"))
        stream = meta.get(b"squall.stream", DEFAULT_STREAM.encode()).decode()
        source = meta.get(b"squall.source", b"").decode()
    except (ValueError, UnicodeDecodeError) as e:
        raise WireFormatError(f"tuple batch: bad metadata ({e})") from None
    return TupleBatch(data.replace_schema_metadata(None), stream, source, task)


# ----- acker and result batches -------------------------------------------


def encode_acker_batch(batch: AckerBatch, ts_ms: int) -> bytes:
    n = len(batch)
    return b"".join((
        _HEADER.pack(_ACKER_MAGIC, _VERSION, 0, 0, n, ts_ms, 0),
        batch.roots.astype("<u8", copy=False).tobytes(),
        batch.values.astype("<u8", copy=False).tobytes(),
        batch.tasks.astype("<u2", copy=False).tobytes(),
        batch.kinds.astype("u1", copy=False).tobytes(),
    ))


def _header(payload: bytes, magic: bytes, row: int, what: str) -> tuple[int, int]:
    if len(payload) < _HEADER.size:
        raise WireFormatError(f"{what}: {len(payload)} bytes is shorter than the header")
    got, version, _, _, n, ts_ms, _ = _HEADER.unpack_from(payload)
    if got != magic:
        raise WireFormatError(f"{what}: magic {got!r}, expected {magic!r}")
    if version != _VERSION:
        raise WireFormatError(f"{what}: version {version} is not supported (only {_VERSION})")
    want = _HEADER.size + n * row
    if len(payload) != want:
        raise WireFormatError(
            f"{what}: {len(payload)} bytes for {n} records, expected {want}"
        )
    return n, ts_ms


def encode_acker_batches(batch: AckerBatch, ts_ms: int,
                         max_records: int = MAX_ACKER_RECORDS) -> list[bytes]:
    """Acker records as messages of at most ``max_records`` each."""
    out = []
    for lo in range(0, max(len(batch), 1), max_records):
        hi = lo + max_records
        out.append(encode_acker_batch(AckerBatch(
            batch.roots[lo:hi], batch.values[lo:hi], batch.kinds[lo:hi], batch.tasks[lo:hi],
            batch.ts_ms[lo:hi]), ts_ms))
    return out


def encode_acker_messages(batch: AckerBatch, num_ackers: int) -> list[tuple[int, bytes]]:
    """``(acker partition, message)`` pairs for a batch of records: each record goes to the
    partition that owns its root (``root mod num_ackers``), in messages of bounded size."""
    if not len(batch):
        return []
    owner = acker_partitions(batch.roots, num_ackers)
    out = []
    for p in np.unique(owner).tolist():
        sel = owner == p
        part = AckerBatch(batch.roots[sel], batch.values[sel], batch.kinds[sel],
                          batch.tasks[sel], batch.ts_ms[sel])
        out += [(int(p), raw) for raw in encode_acker_batches(part, int(part.ts_ms[0]))]
    return out


def decode_acker_batch(payload: bytes) -> AckerBatch:
    """Decode, zero-copy where possible; timestamps come from the header."""
    n, ts_ms = _header(payload, _ACKER_MAGIC, _ACKER_ROW, "acker batch")
    o = _HEADER.size
    roots = np.frombuffer(payload, "<u8", n, o).astype(np.uint64, copy=False)
    values = np.frombuffer(payload, "<u8", n, o + 8 * n).astype(np.uint64, copy=False)
    tasks = np.frombuffer(payload, "<u2", n, o + 16 * n).astype(np.uint16, copy=False)
    kinds = np.frombuffer(payload, "u1", n, o + 18 * n).astype(np.uint8, copy=False)
    if n:
        if int(kinds.min()) < RecordKind.INIT or int(kinds.max()) > RecordKind.RESET:
            bad = kinds[(kinds < RecordKind.INIT) | (kinds > RecordKind.RESET)][0]
            raise WireFormatError(f"acker batch: unknown record kind {int(bad)}")
        if bool(((roots == 0) | (roots == np.uint64(TOMBSTONE))).any()):
            raise WireFormatError("acker batch: root id 0 or 2**64-1 is reserved")
        if int(tasks.max()) > MAX_TASK:
            raise WireFormatError(f"acker batch: spout task {int(tasks.max())} > {MAX_TASK}")
    return AckerBatch(roots, values, kinds, tasks, np.full(n, ts_ms, np.int64))


def encode_results(results: Results, ts_ms: int) -> bytes:
    n = len(results)
    lat = np.clip(results.latency_ms, 0, 0xFFFFFFFF).astype("<u4")
    return b"".join((
        _HEADER.pack(_RESULT_MAGIC, _VERSION, 0, 0, n, ts_ms, 0),
        results.roots.astype("<u8", copy=False).tobytes(),
        results.tasks.astype("<u2", copy=False).tobytes(),
        results.outcomes.astype("u1", copy=False).tobytes(),
        lat.tobytes(),
    ))


def decode_results(payload: bytes) -> Results:
    n, _ = _header(payload, _RESULT_MAGIC, _RESULT_ROW, "result batch")
    o = _HEADER.size
    roots = np.frombuffer(payload, "<u8", n, o).astype(np.uint64, copy=False)
    tasks = np.frombuffer(payload, "<u2", n, o + 8 * n).astype(np.uint16, copy=False)
    outcomes = np.frombuffer(payload, "u1", n, o + 10 * n).astype(np.uint8, copy=False)
    lat = np.frombuffer(payload, "<u4", n, o + 11 * n).astype(np.int64)
    if n and (int(outcomes.min()) < Outcome.ACKED or int(outcomes.max()) > Outcome.RESET):
        raise WireFormatError(f"result batch: unknown outcome in {sorted(set(outcomes.tolist()))}")
    return Results(roots, tasks, outcomes, lat)


# ----- salt markers ---------------------------------------------------------
# A spout task writes the salt its roots are derived from into its own results
# partition, so that after a crash it can recognise the roots acked there.

_SALT_MAGIC = b"SQSL"


def encode_salt_marker(salt: int, ts_ms: int) -> bytes:
    return _HEADER.pack(_SALT_MAGIC, _VERSION, 0, 0, 1, ts_ms, 0) + struct.pack("<Q", salt)


def decode_salt_marker(payload: bytes) -> int | None:
    """The salt, if ``payload`` is a salt marker; None for anything else."""
    if len(payload) != _HEADER.size + 8 or payload[:4] != _SALT_MAGIC:
        return None
    return int(struct.unpack_from("<Q", payload, _HEADER.size)[0])


# ----- dead-letter markers ---------------------------------------------------
# A spout task notes each source offset it dead-lettered in its own results partition,
# so that after a crash it does not dead-letter the same message again.

_LETTER_MAGIC = b"SQDL"


def encode_letter_marker(topic: str, partition: int, offset: int, ts_ms: int) -> bytes:
    name = topic.encode()
    return (_HEADER.pack(_LETTER_MAGIC, _VERSION, 0, 0, len(name), ts_ms, 0)
            + struct.pack("<iq", partition, offset) + name)


def decode_letter_marker(payload: bytes) -> tuple[str, int, int] | None:
    """``(topic, partition, offset)`` if ``payload`` is a dead-letter marker, else None."""
    if payload[:4] != _LETTER_MAGIC or len(payload) < _HEADER.size + 12:
        return None
    partition, offset = struct.unpack_from("<iq", payload, _HEADER.size)
    return payload[_HEADER.size + 12:].decode(errors="replace"), int(partition), int(offset)


# ----- progress marks -------------------------------------------------------
# A bolts job writes its watermark (squall/core/progress.py) into every acker partition,
# after the acks of the micro-batches it covers: the acker reads them in that order.

_PROGRESS_MAGIC = b"SQPG"


def encode_progress(job: str, watermark_ms: int) -> bytes:
    name = job.encode()
    return _HEADER.pack(_PROGRESS_MAGIC, _VERSION, 0, 0, len(name), watermark_ms, 0) + name


def decode_progress(payload: bytes) -> tuple[str, int] | None:
    """``(job, watermark_ms)`` if ``payload`` is a progress mark; None for anything else."""
    if payload[:4] != _PROGRESS_MAGIC:
        return None
    _, ts_ms = _header(payload, _PROGRESS_MAGIC, 1, "progress mark")
    try:
        return payload[_HEADER.size:].decode(), ts_ms
    except UnicodeDecodeError as e:
        raise WireFormatError(f"progress mark: job name is not UTF-8: {e}") from None


def results_clock(payload: bytes) -> int:
    """The acker's timeout clock when it wrote this result batch (an empty batch is its
    heartbeat): the spout's backstop runs on it."""
    return int(_header(payload, _RESULT_MAGIC, _RESULT_ROW, "result batch")[1]) \
        if payload[:4] == _RESULT_MAGIC else -1
