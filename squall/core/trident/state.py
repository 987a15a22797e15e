"""Trident's State interfaces, in Python's names.

A :class:`State` is told where each batch's writes begin and end; a :class:`BackingMap`
(Trident's ``IBackingMap``) stores values by key in bulk; a :class:`MapState` is what a
``persistent_aggregate`` updates. Keys are tuples of the group-by fields' values.

One addition to Trident: :meth:`State.rollback`. Trident retries a failed batch in the same
process; here a failed micro-batch is re-run by Spark, perhaps elsewhere, so whatever the
failed one wrote (an open transaction, a cache) must be dropped first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
V = TypeVar("V")
Key = tuple[Any, ...]
#: The current value (None when the key is new) to the new one.
ValueUpdater = Callable[[T | None], T]


@runtime_checkable
class State(Protocol):
    def begin_commit(self, txid: int) -> None:
        """Batch ``txid``'s writes begin (a database opens its transaction)."""

    def commit(self, txid: int) -> None:
        """Batch ``txid``'s writes are done: make them durable, atomically."""

    def rollback(self, txid: int) -> None:
        """Batch ``txid`` failed: forget what it wrote."""


class BackingMap(Protocol[V]):
    """Trident's ``IBackingMap``: the store under a map kind. Values are the kind's
    (e.g. :class:`~squall.core.trident.values.OpaqueValue`); None for a key not stored."""

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]: ...

    def multi_put(self, keys: Sequence[Key], vals: Sequence[V]) -> None: ...


class MapState(State, Protocol[T]):
    def multi_get(self, keys: Sequence[Key]) -> list[T | None]: ...

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[ValueUpdater[T]]
                     ) -> list[T]: ...

    def multi_put(self, keys: Sequence[Key], vals: Sequence[T]) -> None: ...


def begin(backing: object, txid: int) -> None:
    """Pass a batch's start on to a backing map that is a :class:`State` too."""
    if isinstance(backing, State):
        backing.begin_commit(txid)


def end(backing: object, txid: int, ok: bool = True) -> None:
    if isinstance(backing, State):
        (backing.commit if ok else backing.rollback)(txid)
