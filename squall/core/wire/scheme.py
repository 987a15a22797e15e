"""Schemes: how a source message's bytes become a tuple's values (Storm's ``Scheme``).

Built in: ``raw`` (field ``bytes``), ``text`` (UTF-8, field ``str``, Storm's
StringScheme), ``json`` (an object, the declared fields taken by name). A
user scheme is named ``module:Class`` with the same two members.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

from squall.core.errors import SchemeError, TopologyError
from squall.core.wire.columns import to_columns


class Scheme(Protocol):
    @property
    def fields(self) -> tuple[str, ...]: ...

    def deserialize(self, data: bytes) -> tuple[Any, ...]: ...


def deserialize_columns(scheme: Scheme, values: Sequence[bytes | None]
                        ) -> tuple[dict[str, pa.Array], list[tuple[Any, ...]] | None]:
    """All values at once, as Arrow columns by field (and the rows, where they were made).

    Raises :class:`SchemeError` if any one is bad: the caller then decodes them
    singly to dead-letter just the bad ones. Raw bytes and UTF-8 text never
    become Python objects per message: Arrow takes the buffers and validates.
    """
    if isinstance(scheme, RawScheme | TextScheme):
        col = pa.array(values, pa.binary())
        if col.null_count:
            col = col.fill_null(b"")
        if isinstance(scheme, TextScheme):
            try:
                col = col.cast(pa.string())
            except pa.ArrowInvalid as e:
                raise SchemeError(f"not UTF-8 text: {e}") from None
        return {scheme.fields[0]: col}, None
    n = len(scheme.fields)
    try:
        rows = [scheme.deserialize(v or b"") for v in values]
    except Exception as e:  # a user scheme may raise anything: the caller decodes singly
        raise SchemeError(f"{type(e).__name__}: {e}") from None
    if any(len(r) != n for r in rows):
        raise SchemeError("a row has the wrong number of values")
    cols, bad = to_columns(scheme.fields, rows)
    if bad:
        raise SchemeError(next(iter(bad.values())))
    return cols, rows


class RawScheme:
    fields = ("bytes",)

    def deserialize(self, data: bytes) -> tuple[Any, ...]:
        return (data,)


class TextScheme:
    fields = ("str",)

    def deserialize(self, data: bytes) -> tuple[Any, ...]:
        try:
            return (data.decode("utf-8"),)
        except UnicodeDecodeError as e:
            raise SchemeError(f"not UTF-8 text: {e}") from None


class JsonScheme:
    def __init__(self, fields: Sequence[str]) -> None:
        if not fields:
            raise TopologyError("the json scheme needs the fields to take from each object")
        self.fields = tuple(fields)

    def deserialize(self, data: bytes) -> tuple[Any, ...]:
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise SchemeError(f"not JSON: {type(e).__name__}: {e}") from None
        if not isinstance(obj, dict):
            raise SchemeError(f"expected a JSON object, got {type(obj).__name__}")
        missing = [f for f in self.fields if f not in obj]
        if missing:
            raise SchemeError(f"JSON object lacks fields {missing}")
        return tuple(obj[f] for f in self.fields)


def load_scheme(name: str, fields: Sequence[str] = ()) -> Scheme:
    if name == "raw":
        return RawScheme()
    if name == "text":
        return TextScheme()
    if name == "json":
        return JsonScheme(fields)
    if ":" not in name:
        raise TopologyError(f"unknown scheme {name!r}: use raw, text, json or module:Class")
    mod, _, cls = name.partition(":")
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except (ImportError, AttributeError) as e:
        raise TopologyError(f"scheme {name!r} cannot be loaded: {e}") from None
    scheme = obj(fields) if fields else obj()
    if not hasattr(scheme, "deserialize") or not hasattr(scheme, "fields"):
        raise TopologyError(f"scheme {name!r} has no 'fields' and 'deserialize'")
    return scheme  # type: ignore[no-any-return]
