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

from dataclasses import dataclass
from typing import Generic, TypeVar

from squall.core.errors import StateError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TransactionalValue(Generic[T]):
    txid: int
    val: T


@dataclass(frozen=True, slots=True)
class OpaqueValue(Generic[T]):
    curr_txid: int
    curr: T
    prev: T | None = None

    def base(self, txid: int | None) -> T | None:
        """The value batch ``txid`` builds on (``None``: outside a batch, the current one)."""
        if txid is None or self.curr_txid < txid:
            return self.curr
        if txid == self.curr_txid:
            return self.prev
        raise StateError(f"batch {txid} is behind the state's batch {self.curr_txid}: "
                         "batches must be applied in order")

    def update(self, txid: int, new: T) -> OpaqueValue[T]:
        """The value after batch ``txid`` computed ``new`` from :meth:`base`."""
        return OpaqueValue(txid, new, self.base(txid))
