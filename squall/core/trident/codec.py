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


def encode_changes(kind: MapKind, keys: Sequence[Key], vals: Sequence[Any]) -> bytes:
    """A batch's changed keys and values as one record of the store's change log: compact
    JSON ``[[key, ...], [value, ...]]``, an opaque value as ``[txid, curr, prev]`` and a
    transactional one as ``[txid, val]`` (the named tuples they are). Values are checked as
    :func:`encode_values` does; only the new ones (a ``prev`` was checked as a ``curr``)."""
    news = _news(kind, vals)
    if float in set(map(type, news)) and any(
            type(x) is float and not math.isfinite(x) for x in news):
        encode_values(kind, vals)  # raises, naming the value
    try:  # named tuples as the plain tuples (JSON arrays) they are
        return orjson.dumps((keys, vals if kind is MapKind.NON_TRANSACTIONAL
                             else list(map(tuple, vals))))
    except TypeError:  # name the key or value
        encode_keys(keys)
        encode_values(kind, vals)
        raise


def _news(kind: MapKind, vals: Sequence[Any]) -> list[Any]:
    if kind is MapKind.OPAQUE:
        return [v.curr for v in vals]
    if kind is MapKind.TRANSACTIONAL:
        return [v.val for v in vals]
    return list(vals)


def decode_changes(kind: MapKind, body: bytes) -> tuple[list[Key], list[Any]]:
    """The keys and values of an :func:`encode_changes` record."""
    try:
        keys, docs = _decode(body)
        if kind is MapKind.OPAQUE:
            vals: list[Any] = [OpaqueValue(int(t), c, p) for t, c, p in docs]
        elif kind is MapKind.TRANSACTIONAL:
            vals = [TransactionalValue(int(t), v) for t, v in docs]
        else:
            vals = docs
        if len(keys) != len(vals):
            raise ValueError(f"{len(keys)} keys for {len(vals)} values")
        return [tuple(k) for k in keys], vals
    except (ValueError, TypeError) as e:
        raise StateError(f"a {kind} change record is malformed ({e}): {body[:80]!r}") from None
