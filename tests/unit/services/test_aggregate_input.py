"""A persistent aggregate's micro-batch as the engine gets it (pure: no database)."""

from __future__ import annotations

from services.bolts.aggregate import _input
from squall.core.trident.persist import UNKNOWN
from squall.core.trident.spec import AggregateSpec
from squall.core.tuple_batch import TupleBatch


def test_keys_values_sources_and_records_come_through_per_tuple() -> None:
    spec = AggregateSpec.from_config({"group_by": ["word"], "aggregator": "sum",
                                      "fields": ["n"]}, "count")
    first = TupleBatch.from_columns({"word": ["a", "b", "a"], "n": [1, 2, 3]},
                                    [{5: 1}, {6: 2, 5: 3}, {}],
                                    origins=[("s:0", 7), None, ("s:1", 2)])
    second = TupleBatch.from_columns({"word": ["c"], "n": [4]}, [{}])  # no origins at all
    inp = _input([first, second], spec)
    assert inp.keys == [("a",), ("b",), ("a",), ("c",)]
    assert inp.values == [(1,), (2,), (3,), (4,)]
    assert list(inp.sources) == ["s:0", UNKNOWN, "s:1", UNKNOWN]
    assert inp.offsets.tolist() == [7, -1, 2, -1]
    assert inp.emissions.tolist() == [0, 0, 0, 1]
    assert inp.roots is not None and inp.roots.tolist() == [5, 6, 0, 0]  # 0: no anchor
