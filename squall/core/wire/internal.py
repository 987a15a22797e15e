"""Wire formats of the internal topics (docs/decisions.md, "Wire formats").

- tuple batches (edge topics): :mod:`squall.core.wire.tuple_batch`;
- acker batches (``squall.<topo>.acker``): a 24-byte header then packed
  little-endian columns root u64, value u64, task u16, kind u8;
- result batches (``squall.<topo>.results``): header then root u64,
  task u16, outcome u8, latency_ms u32;
- fail reasons (both topics): header then root u64, reason index u16, then each reason as
  u16 length and UTF-8; before the fails (or failed results) they explain;
- dead letters: the original key and value, the reason in headers.

Every decoder raises :class:`WireFormatError` (and nothing else) on a
malformed payload, naming what was wrong.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

import numpy as np

from squall.core.errors import WireFormatError
from squall.core.reliability.ids import TOMBSTONE, acker_partitions
from squall.core.reliability.records import MAX_TASK, AckerBatch, Outcome, RecordKind, Results

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


# ----- fail reasons ---------------------------------------------------------
# Why a bolt failed a tree (what its bolt raised, what killed its process), to the acker
# that owns the root, and from it to the spout that dead-letters the message in the end.

_REASONS_MAGIC = b"SQFR"
#: A reason's bytes at most (the rest is cut).
MAX_REASON_BYTES = 1_000
_MAX_REASONS = 0xFFFF


def encode_fail_reasons(reasons: Mapping[int, str], ts_ms: int) -> list[bytes]:
    """Roots and why they failed, as messages (the same reason is written once a message)."""
    items = list(reasons.items())
    out = []
    for lo in range(0, len(items), MAX_ACKER_RECORDS):
        chunk = items[lo:lo + MAX_ACKER_RECORDS]
        texts: dict[str, int] = {}
        idx = [texts.setdefault(r, len(texts)) for _, r in chunk]
        if len(texts) > _MAX_REASONS:
            raise WireFormatError(f"fail reasons: {len(texts)} distinct reasons in a message")
        blobs = [t.encode()[:MAX_REASON_BYTES] for t in texts]
        out.append(b"".join((
            _HEADER.pack(_REASONS_MAGIC, _VERSION, 0, 0, len(chunk), ts_ms, len(texts)),
            np.asarray([r for r, _ in chunk], "<u8").tobytes(),
            np.asarray(idx, "<u2").tobytes(),
            *(struct.pack("<H", len(b)) + b for b in blobs))))
    return out


def encode_reason_messages(reasons: Mapping[int, str], num_ackers: int
                           ) -> list[tuple[int, bytes]]:
    """``(acker partition, message)`` pairs: each root's reason to the acker that owns it."""
    if not reasons:
        return []
    roots = np.fromiter(reasons, np.uint64, len(reasons))
    owner = acker_partitions(roots, num_ackers)
    out = []
    for p in np.unique(owner).tolist():
        mine = {int(r): reasons[int(r)] for r in roots[owner == p].tolist()}
        out += [(int(p), raw) for raw in encode_fail_reasons(mine, 0)]
    return out


def decode_fail_reasons(payload: bytes) -> dict[int, str] | None:
    """Root -> reason if ``payload`` is a fail-reasons message; None for anything else."""
    if payload[:4] != _REASONS_MAGIC:
        return None
    if len(payload) < _HEADER.size:
        raise WireFormatError(f"fail reasons: {len(payload)} bytes is shorter than the header")
    _, version, _, _, n, _, m = _HEADER.unpack_from(payload)
    if version != _VERSION:
        raise WireFormatError(f"fail reasons: version {version} is not supported")
    o = _HEADER.size
    if len(payload) < o + 10 * n:
        raise WireFormatError(f"fail reasons: {len(payload)} bytes for {n} roots")
    roots = np.frombuffer(payload, "<u8", n, o).tolist()
    idx = np.frombuffer(payload, "<u2", n, o + 8 * n).tolist()
    at, texts = o + 10 * n, []
    try:
        for _ in range(m):
            (k,) = struct.unpack_from("<H", payload, at)
            texts.append(payload[at + 2:at + 2 + k].decode(errors="replace"))
            at += 2 + k
        return {r: texts[i] for r, i in zip(roots, idx, strict=True)}
    except (struct.error, IndexError) as e:
        raise WireFormatError(f"fail reasons: truncated ({e})") from None


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
# A bolts job writes its watermark (squall/core/reliability/progress.py) into every acker partition,
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
