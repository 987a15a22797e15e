"""Root and edge ids, and which acker owns a root.

Ids are random 64-bit integers, never derived from content: a replayed or
duplicated emit must not cancel an earlier one in the XOR ledger. Two values
are reserved: 0 marks an empty slot and ``TOMBSTONE`` a deleted one in the
ledger's table, so neither is ever handed out.
"""

from __future__ import annotations

import os
import random

import numpy as np
import numpy.typing as npt

MIN_ID = 1
MAX_ID = (1 << 64) - 2
TOMBSTONE = (1 << 64) - 1

U64Array = npt.NDArray[np.uint64]


def new_id(rng: random.Random | None = None) -> int:
    """One random id in [MIN_ID, MAX_ID].

    The module-level ``random`` generator is reseeded by CPython after a fork,
    which matters because Spark forks its Python workers.
    """
    bits = (rng or random).getrandbits
    while True:
        v = bits(64)
        if MIN_ID <= v <= MAX_ID:
            return v


class IdBatcher:
    """Many ids at once, for vectorized emitters; reseeds itself after a fork."""

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed
        self._pid = -1
        self._gen = np.random.default_rng(seed)

    def ids(self, n: int) -> U64Array:
        if self._seed is None and self._pid != os.getpid():
            self._pid = os.getpid()
            self._gen = np.random.default_rng()
        return self._gen.integers(MIN_ID, MAX_ID, size=n, dtype=np.uint64, endpoint=True)


def acker_partition(root: int, n_ackers: int) -> int:
    """The acker task that owns ``root``: ``root mod N``, as Storm's mod hashing."""
    if n_ackers <= 0:
        raise ValueError(f"n_ackers must be positive, got {n_ackers}")
    return root % n_ackers


def acker_partitions(roots: U64Array, n_ackers: int) -> npt.NDArray[np.int64]:
    """Vectorized :func:`acker_partition`."""
    if n_ackers <= 0:
        raise ValueError(f"n_ackers must be positive, got {n_ackers}")
    return (roots % np.uint64(n_ackers)).astype(np.int64)
