"""squall.core.reliability.unique: NumPy's ``unique`` in one pass for sorted input, the same
answers."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from squall.core.reliability.unique import unique, unique_first_inverse

ints = st.lists(st.integers(-5, 40), max_size=200)


@given(ints, st.booleans())
def test_the_same_as_numpy(values: list[int], presorted: bool) -> None:
    a = np.array(sorted(values) if presorted else values, np.int64)
    assert unique(a).tolist() == np.unique(a).tolist()
    vals, first, inverse = unique_first_inverse(a)
    want = np.unique(a, return_index=True, return_inverse=True)
    assert vals.tolist() == want[0].tolist()
    assert first.tolist() == want[1].tolist()
    assert inverse.tolist() == want[2].reshape(-1).tolist()
    assert (vals[inverse] == a).all()


def test_sorted_input_is_not_copied_through_a_sort() -> None:
    a = np.repeat(np.arange(1000, dtype=np.int64), 3)
    vals, first, inverse = unique_first_inverse(a)
    assert vals.tolist() == list(range(1000))
    assert first.tolist() == list(range(0, 3000, 3))
    assert inverse[-3:].tolist() == [999, 999, 999]
