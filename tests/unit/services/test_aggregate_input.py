"""A persistent aggregate's micro-batch as the engine gets it (pure: no database): one
group-by field's keys coded through Arrow, and the cases that fall back to a key per tuple."""

from __future__ import annotations

from typing import Any

from services.bolts.aggregate import _coded_keys, _input
from squall.core.topology.trident import AggregateSpec
from squall.core.trident.persist import UNKNOWN
from squall.core.wire.tuple_batch import TupleBatch


def test_keys_values_sources_and_records_come_through_per_tuple() -> None:
    spec = AggregateSpec.from_config({"group_by": ["word"], "aggregator": "sum",
                                      "fields": ["n"]}, "count")
    first = TupleBatch.from_columns({"word": ["a", "b", "a"], "n": [1, 2, 3]},
                                    [{5: 1}, {6: 2, 5: 3}, {}],
                                    origins=[("s:0", 7), None, ("s:1", 2)])
    second = TupleBatch.from_columns({"word": ["c"], "n": [4]}, [{}])  # no origins at all
    inp = _input([first, second], spec)
    assert list(inp.keys) == [("a",), ("b",), ("a",), ("c",)]
    assert inp.values == [(1,), (2,), (3,), (4,)]
    assert list(inp.sources) == ["s:0", UNKNOWN, "s:1", UNKNOWN]
    assert inp.offsets.tolist() == [7, -1, 2, -1]
    assert inp.emissions.tolist() == [0, 0, 0, 1]
    assert inp.roots is not None and inp.roots.tolist() == [5, 6, 0, 0]  # 0: no anchor


def _batch(**cols: list[Any]) -> TupleBatch:
    n = len(next(iter(cols.values())))
    return TupleBatch.from_columns(cols, [{}] * n)


def test_one_field_s_keys_are_coded_across_records_nulls_included() -> None:
    coded = _coded_keys([_batch(word=["a", "b", None]), _batch(word=["b", "c"])], ("word",))
    assert coded is not None
    assert list(coded) == [("a",), ("b",), (None,), ("b",), ("c",)]
    assert coded.counts() == ([("a",), ("b",), (None,), ("c",)], [1, 2, 1, 1])


def test_several_fields_or_records_of_other_types_are_keyed_per_tuple() -> None:
    assert _coded_keys([_batch(a=["x"], b=[1])], ("a", "b")) is None
    assert _coded_keys([_batch(word=["a"]), _batch(word=[1])], ("word",)) is None
    assert _coded_keys([], ("word",)) is None
