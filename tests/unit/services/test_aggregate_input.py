"""A persistent aggregate's input: one group-by field's keys coded through Arrow, and the
cases that fall back to a key per tuple."""

from __future__ import annotations

from typing import Any

from services.bolts.aggregate import _coded_keys
from squall.core.tuple_batch import TupleBatch


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
