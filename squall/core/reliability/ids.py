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

from squall.core.errors import UsageError

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
        raise UsageError(f"n_ackers must be positive, got {n_ackers}")
    return root % n_ackers


def acker_partitions(roots: U64Array, n_ackers: int) -> npt.NDArray[np.int64]:
    """Vectorized :func:`acker_partition`."""
    if n_ackers <= 0:
        raise UsageError(f"n_ackers must be positive, got {n_ackers}")
    return (roots % np.uint64(n_ackers)).astype(np.int64)


def new_salt() -> int:
    """A random 64-bit key for :func:`derive_roots` (one per spout incarnation)."""
    return random.getrandbits(64)


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def derive_roots(salt: int, source: int, offsets: npt.ArrayLike,
                 attempts: npt.ArrayLike) -> U64Array:
    """Root ids of source messages: a keyed mix of (source partition, offset, attempt).

    splitmix64's finalizer is a bijection of 64 bits, so roots differ whenever
    ``salt ^ pack(source, attempt, offset)`` differ: distinct for offsets below
    2**40, sources below 2**16 and attempts below 2**8. Under a random salt
    they look random to the XOR ledger, and a replay (new attempt) or a new
    spout incarnation (new salt) gets a new root. A spout that knows its old
    salts can recompute the roots it emitted: this is how a restarted spout
    recognises offsets whose trees were acked before it could commit them.
    """
    off = np.asarray(offsets, np.uint64)
    att = np.asarray(attempts, np.uint64)
    packed = (np.uint64(source & 0xFFFF) << np.uint64(48)) | \
             ((att & np.uint64(0xFF)) << np.uint64(40)) | (off & np.uint64((1 << 40) - 1))
    z = (packed ^ np.uint64(salt)) + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    z = z ^ (z >> np.uint64(31))
    # Keep clear of the two reserved values (0 and 2**64-1); a clash is 2**-63 likely.
    z[z == np.uint64(0)] = np.uint64(1)
    z[z == np.uint64(TOMBSTONE)] = np.uint64(MAX_ID)
    return z


_M1_INV = np.uint64(pow(int(_M1), -1, 1 << 64))
_M2_INV = np.uint64(pow(int(_M2), -1, 1 << 64))


def _unshift(y: U64Array, s: int) -> U64Array:
    """Inverse of ``x ^ (x >> s)`` (each pass recovers ``s`` more high bits)."""
    sh = np.uint64(s)
    x = y ^ (y >> sh)
    for _ in range(64 // s):
        x = y ^ (x >> sh)
    return x


def root_keys(salt: int, roots: npt.ArrayLike
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The inverse of :func:`derive_roots` under ``salt``: (source mod 2**16, attempt
    mod 256, offset mod 2**40) per root.

    A spout reads its results with this instead of keeping a table of roots:
    the root says which offset and delivery it was. A root of an earlier
    incarnation (another random salt) decodes to its key XOR the salts'
    difference: it matches a tree in flight only if that difference is zero in
    the source and attempt bits and under the window in the offset bits, about
    window / 2**64 per restart (the caller checks all three and the state). The
    two roots moved off the reserved values decode wrongly (2**-63 likely).
    """
    r = np.asarray(roots, np.uint64)
    z = _unshift(r, 31) * _M2_INV
    z = _unshift(z, 27) * _M1_INV
    packed = (_unshift(z, 30) - _GOLDEN) ^ np.uint64(salt)
    source = (packed >> np.uint64(48)).astype(np.int64)
    attempt = ((packed >> np.uint64(40)) & np.uint64(0xFF)).astype(np.int64)
    offset = (packed & np.uint64((1 << 40) - 1)).astype(np.int64)
    return source, attempt, offset


def full_offsets(low: npt.NDArray[np.int64], near: int) -> npt.NDArray[np.int64]:
    """Offsets from their low 40 bits (as :func:`root_keys` gives them), the ones nearest
    ``near`` (the committed offset: every offset in flight is within 2**39 of it)."""
    span = 1 << 40
    d = (low - near) % span  # how far above ``near``, modulo 2**40
    full: npt.NDArray[np.int64] = near + np.where(d >= span // 2, d - span, d)
    return full
