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
    decode_changes,
    decode_key,
    decode_value,
    decode_values,
    encode_changes,
    encode_key,
    encode_keys,
    encode_value,
    encode_values,
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


@given(st.lists(st.tuples(st.integers(0, 2**62), json_values, json_values), max_size=6))
def test_the_batch_codec_is_the_one_by_one_codec(rows: list[tuple[int, Any, Any]]) -> None:
    for kind, vals in ((MapKind.TRANSACTIONAL, [TransactionalValue(t, a) for t, a, _ in rows]),
                       (MapKind.OPAQUE, [OpaqueValue(t, a, b) for t, a, b in rows]),
                       (MapKind.NON_TRANSACTIONAL, [a for _, a, _ in rows])):
        texts = encode_values(kind, vals)
        assert texts == [encode_value(kind, v) for v in vals]
        assert decode_values(kind, [*texts, None]) == [*vals, None]
    keys = [(str(t), t) for t, _, _ in rows]
    assert encode_keys(keys) == [encode_key(k) for k in keys]


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), object(), {1: "x"}])
def test_the_batch_codec_refuses_and_names_what_json_cannot_hold(bad: Any) -> None:
    with pytest.raises(StateError, match="cannot be stored"):
        encode_values(MapKind.OPAQUE, [OpaqueValue(1, 2, None), OpaqueValue(2, bad, 1)])
    with pytest.raises(StateError, match="malformed"):
        decode_values(MapKind.OPAQUE, ['{"txid": 1, "curr": 1, "prev": null}', "{"])
    with pytest.raises(StateError, match="is not JSON"):
        encode_keys([("ok",), (object(),)])


@given(st.lists(st.tuples(st.text(max_size=8), st.integers(0, 2**62), json_values,
                          json_values), max_size=6, unique_by=lambda r: r[0]))
def test_change_records_round_trip_for_every_kind(rows: list[tuple[str, int, Any, Any]]
                                                  ) -> None:
    keys = [(k, i) for i, (k, *_) in enumerate(rows)]
    for kind, vals in ((MapKind.TRANSACTIONAL, [TransactionalValue(t, a) for _, t, a, _ in rows]),
                       (MapKind.OPAQUE, [OpaqueValue(t, a, b) for _, t, a, b in rows]),
                       (MapKind.NON_TRANSACTIONAL, [a for _, _, a, _ in rows])):
        assert decode_changes(kind, encode_changes(kind, keys, vals)) == (keys, vals)


@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), object(), {1: "x"}])
def test_a_change_record_refuses_and_names_what_json_cannot_hold(bad: Any) -> None:
    for kind, v in ((MapKind.OPAQUE, OpaqueValue(1, bad, 0)),
                    (MapKind.TRANSACTIONAL, TransactionalValue(1, bad)),
                    (MapKind.NON_TRANSACTIONAL, bad)):
        with pytest.raises(StateError, match="cannot be stored"):
            encode_changes(kind, [("k",)], [v])
    with pytest.raises(StateError, match="is not JSON"):
        encode_changes(MapKind.OPAQUE, [(object(),)], [OpaqueValue(1, 1, 0)])


@pytest.mark.parametrize("body", [b"", b"[", b"[[], [1]]", b'[[["a"]], [[1, 2]]]', b"{}"])
def test_a_malformed_change_record_is_a_state_error(body: bytes) -> None:
    with pytest.raises(StateError, match="malformed"):
        decode_changes(MapKind.OPAQUE, body)
