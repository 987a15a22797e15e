"""Wire formats of the internal topics (docs/decisions.md, "Wire formats").

- tuple batches (edge topics): :mod:`squall.core.tuple_batch`;
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

import numpy as np

from squall.core.errors import WireFormatError
from squall.core.ids import TOMBSTONE, acker_partitions
from squall.core.records import MAX_TASK, AckerBatch, Outcome, RecordKind, Results

_HEADER = struct.Struct("<4sBBHIqI")  # magic, version, flags, reserved, count, ts_ms, reserved
_ACKER_MAGIC = b"SQAK"
_RESULT_MAGIC = b"SQRS"
_VERSION = 1
_ACKER_ROW = 8 + 8 + 2 + 1
_RESULT_ROW = 8 + 2 + 1 + 4


MAX_ACKER_RECORDS = 40_000  # 19 bytes each


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
