"""A tuple's place in its source message's tree, the same on every replay.

Exact state applies each source message's tuples once per task
(:mod:`squall.core.trident.applied`). Past the first bolt, one message's tuples for one
task come from several upstream tasks, in several records and micro-batches; what each
delivers must be told apart from the others and from a replay of itself. So every tuple
has a *path*: a spout tuple's is 0, and the ``j``-th tuple emitted while executing a tuple
of path ``p`` has path :func:`child_path` ``(p, j)``. It carries ``p`` (``emitted_by``, the
path of the tuple it was emitted while executing) and ``j`` (its ``nth``; :data:`NO_NTH`
for a spout's tuple), its path made from them where it is executed. The tuples one
execution sends to one task travel in one record, so a state task applies a message's
tuples once per (message, ``emitted_by``). Deterministic bolts (the same children, in the
same order, for the same input; exact state assumes them) give a replay the same paths,
whichever tasks run it and however it is routed.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
#: The ``nth`` of a tuple that is no child (a spout's): its path is 0.
NO_NTH = (1 << 32) - 1
_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def child_path(parent: int, index: int) -> int:
    """The path of the ``index``-th child of a tuple of path ``parent`` (SplitMix64 of the
    two; never 0, a spout tuple's)."""
    z = (parent + _GOLDEN * (index + 1)) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    z ^= z >> 31
    return z or 1


def child_paths(parents: U64, index: I64) -> U64:
    """:func:`child_path` for many children at once."""
    with np.errstate(over="ignore"):
        z = parents.astype(np.uint64) + np.uint64(_GOLDEN) * (index.astype(np.uint64)
                                                               + np.uint64(1))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
        z ^= z >> np.uint64(31)
    out: U64 = np.where(z == 0, np.uint64(1), z)
    return out


def path_of(emitted_by: int, nth: int) -> int:
    """A tuple's path from what it carries."""
    return 0 if nth == NO_NTH else child_path(emitted_by, nth)


def paths_of(emitted_by: U64, nth: npt.NDArray[np.uint32]) -> U64:
    """:func:`path_of` for many tuples."""
    none = nth == NO_NTH
    if none.all():
        return np.zeros(nth.size, np.uint64)
    out = child_paths(emitted_by, nth.astype(np.int64))
    out[none] = 0
    return out


def occurrence(parents: I64) -> I64:
    """Each row's index among the rows with the same parent, in order: which child of its
    parent it is."""
    n = parents.size
    if not n:
        return np.zeros(0, np.int64)
    if n == 1 or bool((parents[1:] >= parents[:-1]).all()):  # a batch bolt's usual order
        starts = np.flatnonzero(np.concatenate([[True], parents[1:] != parents[:-1]]))
        run: I64 = np.arange(n, dtype=np.int64) - np.repeat(starts, np.diff(np.append(starts,
                                                                                      n)))
        return run
    order = np.argsort(parents, kind="stable")
    ranked = parents[order]
    starts = np.flatnonzero(np.concatenate([[True], ranked[1:] != ranked[:-1]]))
    out = np.empty(n, np.int64)
    out[order] = np.arange(n, dtype=np.int64) - np.repeat(starts,
                                                           np.diff(np.append(starts, n)))
    return out


def unit(source: str, emitted_by: int) -> str:
    """What a state task records as applied for a message of ``source`` whose tuples were
    emitted while executing a tuple of path ``emitted_by``: the source itself for the
    spout's tuples' children (the first bolt's output), else the source and that path.
    Topic names hold no ``/``."""
    return source if emitted_by == 0 else f"{source}/{emitted_by:016x}"


def unit_source(name: str) -> str:
    """The source partition (``topic:partition``) of a :func:`unit`."""
    return name.partition("/")[0]
