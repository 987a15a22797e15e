"""Every wire format round-trips; every malformed payload raises WireFormatError only."""

from __future__ import annotations

import contextlib
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import WireFormatError
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.reliability.records import (
    MAX_TASK,
    AckerBatch,
    AckerRecord,
    Outcome,
    RecordKind,
    Result,
    Results,
)
from squall.core.reliability.tuples import Tuple
from squall.core.wire.internal import (
    decode_acker_batch,
    decode_fail_reasons,
    decode_letter_marker,
    decode_progress,
    decode_results,
    decode_salt_marker,
    encode_acker_batch,
    encode_acker_messages,
    encode_fail_reasons,
    encode_letter_marker,
    encode_progress,
    encode_reason_messages,
    encode_results,
)
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples

ids = st.integers(1, 2**64 - 2)
anchors = st.dictionaries(ids, ids, max_size=3)

acker_records = st.builds(
    lambda kind, root, value, task: AckerRecord(
        kind, root, value if kind <= RecordKind.ACK else 0, task),
    st.sampled_from(list(RecordKind)), ids, st.integers(0, 2**64 - 1), st.integers(0, MAX_TASK),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(acker_records, max_size=50), st.integers(0, 2**62))
def test_acker_batch_round_trips(records: list[AckerRecord], ts: int) -> None:
    batch = AckerBatch.from_records(records, ts)
    back = decode_acker_batch(encode_acker_batch(batch, ts))
    assert back.records() == records
    assert back.ts_ms.tolist() == [ts] * len(records)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(Result, ids, st.integers(0, MAX_TASK), st.sampled_from(list(Outcome)),
                          st.integers(0, 2**32 - 1)), max_size=50))
def test_results_round_trip(results: list[Result]) -> None:
    back = decode_results(encode_results(Results.from_results(results), 5))
    assert back.results() == results


values = st.one_of(st.integers(-(2**62), 2**62), st.text(max_size=20), st.none())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=12), st.integers(-(2**62), 2**62), anchors),
                max_size=30),
       st.text(min_size=1, max_size=10), st.integers(0, 1000))
def test_tuple_batch_round_trips(rows: list[tuple[str, int, dict[int, int]]], stream: str,
                                 task: int) -> None:
    fields = ("word", "count")
    # Every third tuple knows its source message (exact state's key), the others do not.
    tuples = [Tuple([w, c], fields, a, stream=stream, source="split", source_task=task,
                    origin=(f"s:{i % 2}", abs(c)) if i % 3 == 0 else None)
              for i, (w, c, a) in enumerate(rows)]
    batch = TupleBatch.from_tuples(tuples, fields, stream=stream, source="split", source_task=task)
    back = decode_tuples(encode_tuples(batch))
    assert back.fields == fields
    assert (back.stream, back.source, back.source_task) == (stream, "split", task)
    got = back.tuples()
    assert [t.values for t in got] == [t.values for t in tuples]
    assert [t.anchors for t in got] == [t.anchors for t in tuples]
    assert [t.origin for t in got] == [t.origin for t in tuples]
    assert back.all_roots().tolist() == [r for t in tuples for r in t.anchors]
    tail = TupleBatch(back.data.slice(len(rows) // 2))
    assert tail.all_roots().tolist() == [r for t in tuples[len(rows) // 2:] for r in t.anchors]


def test_tuple_batch_carries_arrow_types_through() -> None:
    b = TupleBatch.from_columns({"v": pa.array([1.5, 2.5], pa.float32())}, [{1: 2}, {}])
    back = decode_tuples(encode_tuples(b))
    assert back.data.schema.field("v").type == pa.float32()
    assert back.anchors() == [{1: 2}, {}]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_wire_format_error(payload: bytes) -> None:
    for decode in (decode_acker_batch, decode_results, decode_tuples):
        with contextlib.suppress(WireFormatError):
            decode(payload)


@settings(max_examples=200, deadline=None)
@given(st.lists(acker_records, min_size=1, max_size=10), st.data())
def test_corrupted_acker_batches_raise_only_wire_format_error(
    records: list[AckerRecord], data: st.DataObject,
) -> None:
    raw = bytearray(encode_acker_batch(AckerBatch.from_records(records, 1), 1))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for payload in (bytes(raw), bytes(raw[:cut])):
        with contextlib.suppress(WireFormatError):
            decode_acker_batch(payload)


def one_ack() -> bytes:
    return encode_acker_batch(AckerBatch.from_records([AckerRecord(RecordKind.ACK, 5, 1)], 0), 0)


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        (b"", "shorter than the header"),
        (b"NOPE" + one_ack()[4:], "magic b'NOPE'"),
        (one_ack()[:4] + bytes([9]) + one_ack()[5:], "version 9 is not supported"),
        (one_ack() + b"x", "44 bytes for 1 records, expected 43"),
        (one_ack()[:-1] + bytes([7]), "unknown record kind 7"),
        (one_ack()[:24] + struct.pack("<Q", 0) + one_ack()[32:], "root id 0"),
    ],
)
def test_malformed_acker_batches_say_what_is_wrong(payload: bytes, needle: str) -> None:
    with pytest.raises(WireFormatError) as e:
        decode_acker_batch(payload)
    assert needle in str(e.value)


def test_tuple_batch_without_anchor_columns_is_refused() -> None:
    sink = pa.BufferOutputStream()
    data = pa.record_batch({"x": [1, 2]})
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_batch(data)
    with pytest.raises(WireFormatError, match="'__roots' is missing"):
        decode_tuples(bytes(sink.getvalue()))
    with pytest.raises(WireFormatError, match="not an Arrow IPC stream"):
        decode_tuples(b"\x00" * 40)


def test_origin_columns_of_the_wrong_type_are_refused() -> None:
    b = TupleBatch.from_columns({"x": [1]}, [{1: 2}])
    data = b.data.append_column("__src", pa.array(["s:0"])).append_column(
        "__off", pa.array([3], pa.int64()))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_batch(data)
    with pytest.raises(WireFormatError, match="origin columns"):
        decode_tuples(bytes(sink.getvalue()))


def test_reserved_field_names_are_refused() -> None:
    with pytest.raises(WireFormatError, match="reserved"):
        TupleBatch.from_columns({"__roots": [1]}, [{}])
    with pytest.raises(WireFormatError, match="column 'x' has 2 rows, anchors have 1"):
        TupleBatch.from_columns({"x": [1, 2]}, [{}])


def test_dead_letter_headers_round_trip() -> None:
    d = DeadLetterHeaders("timeout", "sentences", 3, 1234, attempts=6, component="spout")
    assert DeadLetterHeaders.from_headers(d.headers()) == d
    with pytest.raises(WireFormatError, match=r"squall\.reason"):
        DeadLetterHeaders.from_headers([])


def test_acker_batch_decode_is_zero_copy_sized() -> None:
    recs = [AckerRecord(RecordKind.ACK, i + 1, i) for i in range(1000)]
    raw = encode_acker_batch(AckerBatch.from_records(recs, 0), 0)
    assert len(raw) == 24 + 19 * 1000
    assert np.array_equal(decode_acker_batch(raw).roots, np.arange(1, 1001, dtype=np.uint64))


def test_large_batches_are_split_under_the_message_size() -> None:
    from squall.core.wire.internal import encode_acker_batches
    from squall.core.wire.tuple_batch import encode_tuples_chunked

    rows = 50_000
    batch = TupleBatch.from_columns({"w": ["x" * 30] * rows}, [{1: 2}] * rows)
    chunks = encode_tuples_chunked(batch, max_bytes=200_000)
    assert len(chunks) > 1
    assert all(len(c) <= 200_000 for c in chunks)
    assert sum(len(decode_tuples(c)) for c in chunks) == rows
    # With origins, no cut separates two tuples of one source message.
    words = 8
    origins = [("s:0", i // words) for i in range(rows)]
    batch = TupleBatch.from_columns({"w": ["x" * 30] * rows}, [{1: 2}] * rows, origins=origins)
    chunks = encode_tuples_chunked(batch, max_bytes=200_000)
    assert len(chunks) > 1
    assert all(len(decode_tuples(c)) % words == 0 for c in chunks)
    one = TupleBatch.from_columns({"w": ["x" * 30] * 10_000}, [{1: 2}] * 10_000,
                                  origins=[("s:0", 5)] * 10_000)
    assert len(encode_tuples_chunked(one, max_bytes=20_000)) == 1  # one message: not cut
    recs = AckerBatch.from_records([AckerRecord(RecordKind.ACK, i + 1, i) for i in range(100)], 0)
    msgs = encode_acker_batches(recs, 0, max_records=30)
    assert [len(decode_acker_batch(m)) for m in msgs] == [30, 30, 30, 10]


@given(st.text(max_size=40), st.integers(0, 2**31 - 1), st.integers(0, 2**62))
def test_dead_letter_markers_round_trip_and_are_not_other_payloads(
        topic: str, partition: int, offset: int) -> None:
    raw = encode_letter_marker(topic, partition, offset, 5)
    assert decode_letter_marker(raw) == (topic, partition, offset)
    assert decode_salt_marker(raw) is None and decode_progress(raw) is None
    assert decode_letter_marker(encode_progress("j", 1)) is None


@given(st.text(max_size=40), st.integers(0, 2**62))
def test_progress_marks_round_trip(job: str, watermark: int) -> None:
    assert decode_progress(encode_progress(job, watermark)) == (job, watermark)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2**64 - 2), st.integers(0, 2**64 - 1),
                          st.sampled_from([RecordKind.INIT, RecordKind.ACK, RecordKind.FAIL]),
                          st.integers(0, 100)), max_size=300),
       st.integers(1, 7))
def test_acker_messages_go_to_the_partition_owning_each_root(
        rows: list[tuple[int, int, RecordKind, int]], ackers: int) -> None:
    batch = AckerBatch(np.array([r[0] for r in rows], np.uint64),
                       np.array([r[1] for r in rows], np.uint64),
                       np.array([int(r[2]) for r in rows], np.uint8),
                       np.array([r[3] for r in rows], np.uint16),
                       np.full(len(rows), 1_700_000_000_000, np.int64))
    got: list[tuple[int, int, int, int]] = []
    for part, raw in encode_acker_messages(batch, ackers):
        assert 0 <= part < ackers
        b = decode_acker_batch(raw)
        assert all(int(r) % ackers == part for r in b.roots)
        got += zip(b.roots.tolist(), b.values.tolist(), b.kinds.tolist(), b.tasks.tolist(),
                   strict=True)
    want = [(r[0], r[1], int(r[2]), r[3]) for r in rows]
    assert sorted(got) == sorted(want)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(ids, st.sampled_from(["killed (exit 17)", "did not return within 3 s",
                                             "ValueError: é\n", ""]), max_size=50))
def test_fail_reasons_round_trip_each_reason_written_once(reasons: dict[int, str]) -> None:
    raws = encode_fail_reasons(reasons, 5)
    got: dict[int, str] = {}
    for raw in raws:
        one = decode_fail_reasons(raw)
        assert one is not None
        got |= one
    assert got == reasons
    assert sum(len(r) for r in raws) < 24 + 10 * len(reasons) + 2 * 4 + 60 + 24


def test_fail_reasons_go_to_the_acker_that_owns_each_root() -> None:
    reasons = {i: f"r{i % 3}" for i in range(1, 40)}
    for p, raw in encode_reason_messages(reasons, 4):
        got = decode_fail_reasons(raw)
        assert got is not None and all(r % 4 == p for r in got)
    assert decode_fail_reasons(encode_results(Results.empty(), 0)) is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_malformed_fail_reasons_raise_wire_format_error_only(junk: bytes) -> None:
    raw = encode_fail_reasons({1: "a", 2: "bc"}, 0)[0]
    for payload in (b"SQFR" + junk, raw[:len(junk) % len(raw)], raw[:24] + junk):
        with contextlib.suppress(WireFormatError):
            decode_fail_reasons(payload)
