"""Keys and stored values as JSON text, for the database backends.

JSON, so a state's table can be read with the database's own tools (``SELECT key, value
FROM squall_state``): keys are JSON arrays of the group-by fields' values, values the map
kind's stored value (``{"txid", "val"}``, ``{"txid", "curr", "prev"}``, or the bare value of
a non-transactional map). Values must therefore be JSON: numbers, strings, booleans, None,
lists and string-keyed objects. A value that is not is refused with a :class:`StateError`
naming it, before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import orjson

from squall.core.errors import StateError
from squall.core.trident.state import Key
from squall.core.trident.values import OpaqueValue, TransactionalValue

# orjson: the standard library's encoder was most of the state's time (~4 us a value).
_decode = orjson.loads


class MapKind(StrEnum):
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"
    NON_TRANSACTIONAL = "non_transactional"


def encode_key(key: Key) -> str:
    try:
        return orjson.dumps(key).decode()
    except TypeError as e:  # orjson.JSONEncodeError
        raise StateError(f"key {key!r} is not JSON ({e})") from None


def encode_keys(keys: Sequence[Key]) -> list[str]:
    try:
        return [orjson.dumps(k).decode() for k in keys]
    except TypeError:
        for k in keys:
            encode_key(k)  # raises, naming the key
        raise


def decode_key(text: str) -> Key:
    return tuple(_decode(text))


def encode_value(kind: MapKind, v: Any) -> str:
    if kind is MapKind.TRANSACTIONAL:
        doc: Any = {"txid": v.txid, "val": v.val}
        top: Any = (v.val,)
    elif kind is MapKind.OPAQUE:
        doc = {"txid": v.curr_txid, "curr": v.curr, "prev": v.prev}
        top = (v.curr, v.prev)
    else:
        doc = v
        top = (v,)
    for x in top:  # JSON has no NaN or infinity (orjson would store them as null)
        if isinstance(x, float) and not math.isfinite(x):
            raise StateError(f"value {v!r} cannot be stored: {x} is not a JSON number")
    try:
        return orjson.dumps(doc).decode()
    except TypeError as e:  # orjson.JSONEncodeError
        raise StateError(f"value {v!r} cannot be stored: not JSON ({e})") from None


def decode_value(kind: MapKind, text: str) -> Any:
    try:
        doc = _decode(text)
        if kind is MapKind.TRANSACTIONAL:
            return TransactionalValue(int(doc["txid"]), doc["val"])
        if kind is MapKind.OPAQUE:
            return OpaqueValue(int(doc["txid"]), doc["curr"], doc["prev"])
        return doc
    except (ValueError, KeyError, TypeError) as e:  # orjson.JSONDecodeError is a ValueError
        raise StateError(f"a stored {kind} value is malformed ({e}): {text[:80]!r}") from None


def encode_values(kind: MapKind, vals: Sequence[Any]) -> list[str]:
    """:func:`encode_value` of each, in one pass (a batch's values: the hot path)."""
    dumps = orjson.dumps
    try:
        if kind is MapKind.OPAQUE:
            out = [dumps({"txid": v.curr_txid, "curr": v.curr, "prev": v.prev}).decode()
                   for v in vals]
            tops: list[Any] = [x for v in vals for x in (v.curr, v.prev)]
        elif kind is MapKind.TRANSACTIONAL:
            out = [dumps({"txid": v.txid, "val": v.val}).decode() for v in vals]
            tops = [v.val for v in vals]
        else:
            out = [dumps(v).decode() for v in vals]
            tops = list(vals)
    except TypeError:  # name the value: the one-by-one encoder does
        for v in vals:
            encode_value(kind, v)
        raise
    if any(type(x) is float and not math.isfinite(x) for x in tops):
        for v in vals:
            encode_value(kind, v)  # raises, naming the value
    return out


def decode_values(kind: MapKind, texts: Sequence[str | None]) -> list[Any]:
    """:func:`decode_value` of each (None stays None), in one pass."""
    loads = _decode
    try:
        if kind is MapKind.OPAQUE:
            return [None if t is None else OpaqueValue(int((d := loads(t))["txid"]), d["curr"],
                                                       d["prev"]) for t in texts]
        if kind is MapKind.TRANSACTIONAL:
            return [None if t is None else TransactionalValue(int((d := loads(t))["txid"]),
                                                              d["val"]) for t in texts]
        return [None if t is None else loads(t) for t in texts]
    except (ValueError, KeyError, TypeError):
        for t in texts:
            if t is not None:
                decode_value(kind, t)  # raises, naming the text
        raise
