"""Schemes under hostile input: every failure is a SchemeError or a left-out row, never a crash.

Fuzzed with hypothesis: arbitrary bytes into every built-in scheme, arbitrary JSON
objects against declared fields, and whole spout batches of them.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.errors import SchemeError
from squall.core.tasks.spout_task import SpoutConfig, SpoutTask
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.columns import to_columns
from squall.core.wire.scheme import (
    JsonScheme,
    RawScheme,
    TextScheme,
    deserialize_columns,
)

FIELDS = ("id", "name")
EDGE = Edge("b", "squall.t.edge.s.default.b", 2, Grouping.FIELDS, ("id",))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)
objects = st.dictionaries(st.sampled_from(["id", "name", "other"]), json_values)
payloads = st.one_of(st.binary(max_size=64), objects.map(lambda o: json.dumps(o).encode()),
                     st.just(b"[" * 5000), st.just(b'{"id": ' + b"9" * 40 + b', "name": 1}'))


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_text_and_raw_decode_or_raise_scheme_error(data: bytes) -> None:
    assert RawScheme().deserialize(data) == (data,)
    try:
        (text,) = TextScheme().deserialize(data)
    except SchemeError:
        return
    assert text.encode() == data


@settings(deadline=None)
@given(payloads)
def test_json_decodes_the_declared_fields_or_raises_scheme_error(data: bytes) -> None:
    try:
        row = JsonScheme(FIELDS).deserialize(data)
    except SchemeError as e:
        assert str(e)
        return
    obj = json.loads(data)
    assert row == (obj["id"], obj["name"])


@settings(deadline=None)
@given(st.lists(payloads, min_size=1, max_size=20))
def test_columns_hold_every_row_or_raise_scheme_error(values: list[bytes]) -> None:
    try:
        cols, rows = deserialize_columns(JsonScheme(FIELDS), values)
    except SchemeError:
        return
    assert rows is not None
    assert all(len(c) == len(values) for c in cols.values())


@settings(deadline=None)
@given(st.lists(st.tuples(json_values, json_values), min_size=1, max_size=20))
def test_to_columns_keeps_or_names_every_row(rows: list[tuple[Any, Any]]) -> None:
    cols, bad = to_columns(FIELDS, rows)
    assert all(len(c) == len(rows) - len(bad) for c in cols.values())
    kept = [r for i, r in enumerate(rows) if i not in bad]
    for c, f in enumerate(FIELDS):  # the values kept are the rows' own, in order
        for got, row in zip(cols[f].to_pylist(), kept, strict=True):
            if not isinstance(row[c], list | dict):
                assert got == row[c]
    assert all(isinstance(r, str) and r.startswith("field ") for r in bad.values())


def test_a_wrongly_typed_value_among_integers_is_left_out_by_name() -> None:
    rows = [(1, "a"), ("seven", "b"), (3, "c"), (2 ** 70, "d"), (4, ["not", "text"])]
    cols, bad = to_columns(FIELDS, rows)
    assert sorted(bad) == [1, 3, 4]
    assert "'seven'" in bad[1] and "'id'" in bad[1]
    assert cols["id"].to_pylist() == [1, 3]
    assert cols["id"].type == pa.int64()


def test_integers_among_floats_are_not_dead_letters() -> None:
    cols, bad = to_columns(("x",), [(1,), (2.5,), (3,)])
    assert not bad and cols["x"].to_pylist() == [1.0, 2.5, 3.0]


def _task() -> SpoutTask:
    return SpoutTask(SpoutConfig(task=0, component="s", scheme=JsonScheme(FIELDS), edges=(EDGE,),
                                 num_ackers=1, timeout_ms=1000), [0], salt=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(payloads, min_size=1, max_size=30))
def test_a_spout_batch_of_anything_emits_or_dead_letters_each_record_once(
        values: list[bytes]) -> None:
    task = _task()
    offsets = list(range(len(values)))
    out = task.on_records(0, offsets, values, values, 0)
    lettered = [letter.offset for letter in out.letters]
    assert len(set(lettered)) == len(lettered)
    assert out.emitted + len(lettered) == len(values)
    assert all(letter.reason.startswith("undecodable") for letter in out.letters)
    for letter in out.letters:
        task.dead_lettered(letter)
    assert task.pending == out.emitted


def test_seven_among_integer_ids_is_dead_lettered_and_the_rest_emitted() -> None:
    values = [json.dumps({"id": i, "name": "n"}).encode() for i in range(5)]
    values[2] = b'{"id": "seven", "name": "n"}'
    task = _task()
    out = task.on_records(0, list(range(5)), values, values, 0)
    assert [letter.offset for letter in out.letters] == [2]
    assert "'seven'" in out.letters[0].reason
    assert out.emitted == 4
    task.dead_lettered(out.letters[0])
    assert task.pending == 4
