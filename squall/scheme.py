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

from squall.errors import SquallError, TopologyError


class SchemeError(SquallError):
    """A source message the scheme cannot decode (it is dead-lettered, never dropped)."""


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


def to_columns(fields: Sequence[str], rows: Sequence[tuple[Any, ...]]
               ) -> tuple[dict[str, pa.Array], dict[int, str]]:
    """Decoded rows as one Arrow column per field, and the rows that cannot join them.

    A column has one type. Where the rows' values do not share one (``"seven"``
    among integer ids, a list among strings, an integer beyond 64 bits), the
    type most rows have wins (integers among floats become floats) and each
    row that does not fit is returned as ``{index: reason}``, to be
    dead-lettered; the columns then hold the other rows only.
    """
    try:
        return {f: pa.array([r[c] for r in rows]) for c, f in enumerate(fields)}, {}
    except _ARROW_ERRORS:
        pass
    bad: dict[int, str] = {}
    cells: list[list[pa.Array | None]] = []  # per field, each row's value as a 1-long array
    for c, f in enumerate(fields):
        seen: dict[pa.DataType, int] = {}
        own: dict[int, pa.DataType] = {}
        for i, r in enumerate(rows):
            try:
                t = own[i] = pa.array([r[c]]).type
            except _ARROW_ERRORS as e:
                bad.setdefault(i, f"field {f!r}: {_show(r[c])} cannot be converted ({e})")
                continue
            if t != pa.null():
                seen[t] = seen.get(t, 0) + 1
        t = max(seen, key=lambda k: seen[k]) if seen else pa.null()
        if pa.types.is_integer(t) and any(pa.types.is_floating(k) for k in seen):
            t = pa.float64()
        col: list[pa.Array | None] = []
        for i, r in enumerate(rows):
            if i in bad:
                col.append(None)
                continue
            try:
                if not _fits(own[i], t):  # pyarrow would turn "ab" into ["a", "b"]
                    raise TypeError(f"a {own[i]} is not a {t}")
                col.append(pa.array([r[c]], t))
            except _ARROW_ERRORS as e:
                col.append(None)
                bad[i] = f"field {f!r}: {_show(r[c])} does not fit the field's type {t} ({e})"
        cells.append(col)
    # Joined from the rows' own arrays: each was converted to the column's type already.
    return {f: pa.concat_arrays([a for i, a in enumerate(cells[c]) if i not in bad]
                                or [pa.array([], pa.null())])
            for c, f in enumerate(fields)}, bad


def _fits(own: pa.DataType, column: pa.DataType) -> bool:
    """A value of type ``own`` may join a column of type ``column`` without changing kind."""
    if own == column or own == pa.null():
        return True
    if pa.types.is_integer(own) and pa.types.is_floating(column):
        return True
    nested = (pa.types.is_list, pa.types.is_struct)
    return any(kind(own) and kind(column) for kind in nested)


#: What pyarrow raises on a value of the wrong type (DESIGN.md: never a crash).
_ARROW_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


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
