"""A ``partition_persist`` example: Trident's ``StateUpdater``, as a bank keeps balances.

Each payment tuple ``(account, amount)`` is added to its account's balance in the state;
the updater emits ``(account, balance)`` for each account the batch changed. Run with
``examples/ledger.yaml``: the balances are exact through replays (Squall skips the
tuples of messages the task applied before, and the txid covers Spark's re-runs).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from squall.trident import Collector, MapState


class AddToBalance:
    """``update_state(state, tuples, collector)``: one ``multi_update`` per batch. Not a
    ``multi_get`` then ``multi_put``: under a transactional map a batch that Spark runs
    again would add its amounts twice (the map's txid rule lives in ``multi_update``, as in
    Trident)."""

    def update_state(self, state: MapState[Any], tuples: Sequence[Sequence[Any]],
                     collector: Collector) -> None:
        deltas: dict[tuple[Any, ...], float] = {}
        for account, amount in tuples:
            deltas[(account,)] = deltas.get((account,), 0) + amount
        keys = list(deltas)
        balances = state.multi_update(keys, [_adding(deltas[k]) for k in keys])
        for (account,), balance in zip(keys, balances, strict=True):
            collector.emit((account, balance))


def _adding(delta: float) -> Callable[[Any], Any]:
    return lambda balance: (balance or 0) + delta
