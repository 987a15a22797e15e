"""What a transactional or opaque map stores per key, and the rules that make a replayed
batch count once (Trident State, "Transactional spouts" and "Opaque transactional spouts").

- **Transactional** ``(txid, val)``: a batch whose txid is the stored one was applied
  already, and is skipped; any other txid is applied to ``val`` and stored with it. Sound
  only when a batch replayed under its txid holds exactly the same tuples, as a micro-batch
  that Spark runs again does (same batch id, same input offsets).
- **Opaque** ``(curr_txid, curr, prev)``: a newer txid moves ``curr`` to ``prev`` and applies
  to ``curr``; the stored txid again means the batch is being replayed, perhaps with other
  tuples, so it is recomputed from ``prev``. An older txid is an error: batches are applied
  in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

from squall.core.errors import StateError

T = TypeVar("T")


# Named tuples, not dataclasses: a batch makes one per key, and a tuple is made in half
# the time (and the change log writes it as the JSON array it is).
class TransactionalValue(NamedTuple, Generic[T]):
    txid: int
    val: T


class OpaqueValue(NamedTuple, Generic[T]):
    curr_txid: int
    curr: T
    prev: T | None = None

    def base(self, txid: int | None) -> T | None:
        """The value batch ``txid`` builds on (``None``: outside a batch, the current one)."""
        if txid is None or self.curr_txid < txid:
            return self.curr
        if txid == self.curr_txid:
            return self.prev
        raise _behind(txid, self.curr_txid)

    def update(self, txid: int, new: T) -> OpaqueValue[T]:
        """The value after batch ``txid`` computed ``new`` from :meth:`base`."""
        return OpaqueValue(txid, new, self.base(txid))


def opaque_bases(curs: Sequence[OpaqueValue[T] | None], txid: int) -> list[T | None]:
    """:meth:`OpaqueValue.base` of each (None for a new key), in one pass."""
    out: list[T | None] = []
    add = out.append
    for c in curs:
        if c is None:
            add(None)
        elif c.curr_txid < txid:
            add(c.curr)
        elif c.curr_txid == txid:
            add(c.prev)
        else:
            raise _behind(txid, c.curr_txid)
    return out


def _behind(txid: int, stored: int) -> StateError:
    return StateError(f"batch {txid} is behind the state's batch {stored}: "
                      "batches must be applied in order")
