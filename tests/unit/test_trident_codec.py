"""The state's JSON codec: keys and each map kind's values round-trip; what JSON cannot
hold is refused with the value named."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.errors import StateError
from squall.core.trident.codec import (
    MapKind,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from squall.core.trident.values import OpaqueValue, TransactionalValue

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)),
    max_leaves=10)


@given(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20)),
                max_size=4))
def test_keys_round_trip(key: list[Any]) -> None:
    assert decode_key(encode_key(tuple(key))) == tuple(key)


@given(st.integers(0, 2**62), json_values, json_values)
def test_values_of_every_kind_round_trip(txid: int, a: Any, b: Any) -> None:
    for kind, v in ((MapKind.TRANSACTIONAL, TransactionalValue(txid, a)),
                    (MapKind.OPAQUE, OpaqueValue(txid, a, b)),
                    (MapKind.NON_TRANSACTIONAL, a)):
        assert decode_value(kind, encode_value(kind, v)) == v


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), object(), {1: "x"}])
def test_what_json_cannot_hold_is_refused(bad: Any) -> None:
    with pytest.raises(StateError, match="cannot be stored"):
        encode_value(MapKind.TRANSACTIONAL, TransactionalValue(1, bad))
    with pytest.raises(StateError, match="is not JSON"):
        encode_key((object(),))


@pytest.mark.parametrize("text", ["", "{", '{"txid": "x", "val": 1}', "[1,2]"])
def test_a_malformed_stored_value_is_a_state_error(text: str) -> None:
    with pytest.raises(StateError, match="malformed"):
        decode_value(MapKind.TRANSACTIONAL, text)
