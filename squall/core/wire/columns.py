"""Rows of Python values as Arrow columns, and the rows that cannot join them.

Decoded source messages (squall/core/wire/scheme.py) and a bolt's emitted rows
(squall/core/tasks/executor.py) become one Arrow column per field; a value of another
type than the rest must fail its own record, never the whole batch or the
process. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa


def to_columns(fields: Sequence[str], rows: Sequence[Sequence[Any]]
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
    except ARROW_ERRORS:
        pass
    bad: dict[int, str] = {}
    cells: list[list[pa.Array | None]] = []  # per field, each row's value as a 1-long array
    for c, f in enumerate(fields):
        seen: dict[pa.DataType, int] = {}
        own: dict[int, pa.DataType] = {}
        for i, r in enumerate(rows):
            try:
                t = own[i] = pa.array([r[c]]).type
            except ARROW_ERRORS as e:
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
            except ARROW_ERRORS as e:
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


#: What pyarrow raises on a value of the wrong type (bad input is a dead letter, never a crash).
ARROW_ERRORS = (pa.ArrowException, OverflowError, TypeError, ValueError)


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."
