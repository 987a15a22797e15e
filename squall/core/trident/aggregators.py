"""Trident's aggregators for ``persistent_aggregate``, and a batch turned into updates.

A :class:`CombinerAggregator` is applied per tuple (``init``) and combined pairwise: a batch
is reduced to one partial value per key, then combined with the stored value. A
:class:`ReducerAggregator` folds the key's tuples, in order, into the stored value (or into
``init()`` for a new key).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, cast, overload, runtime_checkable

import numpy as np
import numpy.typing as npt

from squall.core.trident.state import Key, ValueUpdater

T = TypeVar("T")
Values = Sequence[Any]


@runtime_checkable
class CombinerAggregator(Protocol[T]):
    def init(self, values: Values) -> T: ...

    def combine(self, a: T, b: T) -> T: ...

    def zero(self) -> T: ...


@runtime_checkable
class ReducerAggregator(Protocol[T]):
    def init(self) -> T: ...

    def reduce(self, curr: T, values: Values) -> T: ...


class Count:
    """How many tuples (Trident's ``Count``)."""

    def init(self, values: Values) -> int:
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def zero(self) -> int:
        return 0


class Sum:
    """The sum of the first input field (Trident's ``Sum``)."""

    def init(self, values: Values) -> Any:
        return values[0]

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def zero(self) -> Any:
        return 0


class CodedKeys(Sequence[Key]):
    """A batch's keys as codes into its distinct keys (``uniq[codes[i]]`` is tuple ``i``'s),
    as a columnar input gives them: counted without a Python call per tuple."""

    def __init__(self, codes: npt.NDArray[np.int64], uniq: Sequence[Key]) -> None:
        self.codes = codes
        self.uniq = uniq

    def __len__(self) -> int:
        return int(self.codes.size)

    @overload
    def __getitem__(self, i: int) -> Key: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[Key]: ...

    def __getitem__(self, i: int | slice) -> Key | Sequence[Key]:
        if isinstance(i, slice):
            return CodedKeys(self.codes[i], self.uniq)
        return self.uniq[int(self.codes[i])]

    def take(self, idx: npt.NDArray[np.int64]) -> CodedKeys:
        return CodedKeys(self.codes[idx], self.uniq)

    def counts(self) -> tuple[list[Key], list[int]]:
        """Each key present once, in the order first seen, with its number of tuples."""
        n = np.bincount(self.codes, minlength=len(self.uniq))
        # Where each code first occurs, in one pass (np.unique would sort the codes).
        first = np.full(len(self.uniq), len(self.codes), np.int64)
        np.minimum.at(first, self.codes, np.arange(len(self.codes)))
        present = np.flatnonzero(n)
        order = present[np.argsort(first[present])]
        return [self.uniq[c] for c in order.tolist()], n[order].tolist()


def batch_updates(keys: Sequence[Key], values: Sequence[Values],
                  agg: CombinerAggregator[T] | ReducerAggregator[T]
                  ) -> tuple[list[Key], Sequence[ValueUpdater[T]]]:
    """Each key of a batch once, with the updater that applies its tuples (key order: first
    seen); a combiner's as :class:`CombinerUpdates`, which the maps apply in bulk."""
    if isinstance(agg, CombinerAggregator):
        partial: dict[Key, Any]
        kind: type = type(agg)
        if kind is Count and isinstance(keys, CodedKeys):
            uniq, n = keys.counts()
            return uniq, CombinerUpdates(agg, cast(list[T], n))
        if kind is Count:  # the common cases without a Python call per tuple
            partial = Counter(keys)
        elif kind is Sum:
            partial = {}
            for k, v in zip(keys, values, strict=True):
                partial[k] = partial[k] + v[0] if k in partial else v[0]
        else:
            partial = {}
            for k, v in zip(keys, values, strict=True):
                x = agg.init(v)
                partial[k] = agg.combine(partial[k], x) if k in partial else x
        return list(partial), CombinerUpdates(agg, list(partial.values()))
    grouped: dict[Key, list[Values]] = {}
    for k, v in zip(keys, values, strict=True):
        grouped.setdefault(k, []).append(v)
    return list(grouped), [_reducing(agg, vs) for vs in grouped.values()]


class CombinerUpdates(Sequence[ValueUpdater[T]]):
    """Each key's updater (its batch's partial combined with the current value), applied in
    bulk by the maps through :meth:`apply`: no Python call per key for a count or a sum."""

    def __init__(self, agg: CombinerAggregator[T], partials: list[T]) -> None:
        self.agg = agg
        self.partials = partials
        self._adds = type(agg) in (Count, Sum)

    def __len__(self) -> int:
        return len(self.partials)

    @overload
    def __getitem__(self, i: int) -> ValueUpdater[T]: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[ValueUpdater[T]]: ...

    def __getitem__(self, i: int | slice) -> ValueUpdater[T] | Sequence[ValueUpdater[T]]:
        if isinstance(i, slice):
            return CombinerUpdates(self.agg, self.partials[i])
        partial, combine = self.partials[i], self.agg.combine
        return lambda cur: partial if cur is None else combine(cur, partial)

    def subset(self, idx: Sequence[int]) -> CombinerUpdates[T]:
        return CombinerUpdates(self.agg, [self.partials[i] for i in idx])

    def apply(self, currents: Sequence[T | None]) -> list[T]:
        """Each key's new value from its current one (None: a new key)."""
        if self._adds:
            return [p if c is None else c + p  # type: ignore[operator]
                    for c, p in zip(currents, self.partials, strict=True)]
        combine = self.agg.combine
        return [p if c is None else combine(c, p)
                for c, p in zip(currents, self.partials, strict=True)]


def _reducing(agg: ReducerAggregator[T], vs: list[Values]) -> ValueUpdater[T]:
    def up(cur: T | None) -> T:
        acc = agg.init() if cur is None else cur
        for v in vs:
            acc = agg.reduce(acc, v)
        return acc

    return up
