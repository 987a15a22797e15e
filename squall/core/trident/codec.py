"""Keys and stored values as JSON text, for the database backends.

JSON, so a state's table can be read with the database's own tools (``SELECT key, value
FROM squall_state``): keys are JSON arrays of the group-by fields' values, values the map
kind's stored value (``{"txid", "val"}``, ``{"txid", "curr", "prev"}``, or the bare value of
a non-transactional map). Values must therefore be JSON: numbers, strings, booleans, None,
lists and string-keyed objects. A value that is not is refused with a :class:`StateError`
naming it, before anything is written.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

from squall.core.errors import StateError
from squall.core.trident.state import Key
from squall.core.trident.values import OpaqueValue, TransactionalValue


class MapKind(StrEnum):
    TRANSACTIONAL = "transactional"
    OPAQUE = "opaque"
    NON_TRANSACTIONAL = "non_transactional"


def encode_key(key: Key) -> str:
    try:
        return json.dumps(list(key), separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StateError(f"key {key!r} is not JSON ({e})") from None


def decode_key(text: str) -> Key:
    return tuple(json.loads(text))


def encode_value(kind: MapKind, v: Any) -> str:
    if kind is MapKind.TRANSACTIONAL:
        doc: Any = {"txid": v.txid, "val": v.val}
    elif kind is MapKind.OPAQUE:
        doc = {"txid": v.curr_txid, "curr": v.curr, "prev": v.prev}
    else:
        doc = v
    try:
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise StateError(f"value {v!r} cannot be stored: not JSON ({e})") from None


def decode_value(kind: MapKind, text: str) -> Any:
    try:
        doc = json.loads(text)
        if kind is MapKind.TRANSACTIONAL:
            return TransactionalValue(int(doc["txid"]), doc["val"])
        if kind is MapKind.OPAQUE:
            return OpaqueValue(int(doc["txid"]), doc["curr"], doc["prev"])
        return doc
    except (ValueError, KeyError, TypeError) as e:
        raise StateError(f"a stored {kind} value is malformed ({e}): {text[:80]!r}") from None
