"""``np.unique`` for arrays that are usually sorted already.

A micro-batch's offsets of one source come in the order the spout read them, so the
exactly-once bookkeeping's ``np.unique`` calls sorted what was sorted, ten times the work
of one pass that checks the order and drops repeats. Unsorted input (replays) takes
``np.unique``.
Pure.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Positions = npt.NDArray[np.intp]


def run_starts(a: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Where each run of equal neighbours begins (in a sorted array: each value's first)."""
    new = np.empty(a.size, np.bool_)
    new[:1] = True
    np.not_equal(a[1:], a[:-1], out=new[1:])
    return new


def _run_starts(a: I64) -> npt.NDArray[np.bool_] | None:
    """:func:`run_starts`, if ``a`` is sorted (else None)."""
    if a.size > 1 and not bool(np.all(a[1:] >= a[:-1])):
        return None
    return run_starts(a)


def unique(a: I64) -> I64:
    """``np.unique(a)``."""
    new = _run_starts(a)
    out: I64 = np.unique(a) if new is None else a[new]
    return out


def unique_first_inverse(a: I64) -> tuple[I64, Positions, Positions]:
    """``np.unique(a, return_index=True, return_inverse=True)``: the values, where each
    first occurs, and each element's value as an index into them."""
    new = _run_starts(a)
    if new is None:
        vals, first, inverse = np.unique(a, return_index=True, return_inverse=True)
        return vals, first, inverse.reshape(-1)
    first = np.flatnonzero(new)
    inv: Positions = np.cumsum(new, dtype=np.intp) - 1
    return a[first], first, inv
