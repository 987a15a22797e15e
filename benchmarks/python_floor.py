"""The least Storm's per-tuple API can cost in CPython: the same bolts' code run over bare
stand-ins, with no anchoring, routing, batching or acking behind them.

A stand-in tuple is a list of values with its fields' index; the collector's ``emit`` and
``ack`` each append to a list; the state's ``get`` and ``put`` are a dict's, with the keys
put remembered (as a store must know what changed). Each is a Python call, as the API asks
for; nothing else is done. What a Squall executor costs beyond this floor is Squall's; the
floor itself is the bolts' own Python and the calls the API makes per tuple.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, cast

from squall.core.bolt_api.bolt import BasicBolt, Bolt


class BareTuple:
    __slots__ = ("index", "values")
    is_tick: ClassVar[bool] = False

    def __init__(self, values: Sequence[Any], index: dict[str, int]) -> None:
        self.values, self.index = values, index

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            return self.values[self.index[key]]
        return self.values[key]


class BareCollector:
    def __init__(self) -> None:
        self.emitted: list[tuple[Sequence[Any], Any]] = []
        self.acked: list[BareTuple] = []

    def emit(self, values: Sequence[Any], anchors: Any = None, stream: str = "default") -> None:
        self.emitted.append((values, anchors))

    def ack(self, t: BareTuple) -> None:
        self.acked.append(t)


class BareState:
    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.dirty: set[Any] = set()

    def get(self, key: Any, default: Any = None) -> Any:
        return self.data.get(key, default)

    def put(self, key: Any, value: Any) -> None:
        self.data[key] = value
        self.dirty.add(key)


def bolt(cls: Callable[[], Bolt]) -> tuple[Bolt, BareCollector]:
    """A bolt prepared with a bare collector, and a bare state if it keeps one."""
    b, collector = cls(), BareCollector()
    # stand-ins where the API's types are Squall's: the bolts call them the same way
    b.prepare({}, cast(Any, None), cast(Any, collector))
    if b.stateful:
        b.init_state(cast(Any, BareState()))
    return b, collector


def split(splitter: Callable[[], BasicBolt], sentences: Sequence[str]) -> list[BareTuple]:
    """Each sentence a tuple through the split's ``process``; each row it returns a tuple."""
    b, _ = bolt(splitter)
    assert isinstance(b, BasicBolt)
    # a stand-in where the bolt's signature says Tuple: it reads it the same way
    process: Callable[[Any], Iterable[Sequence[Any]] | None] = b.process
    fields, words = {"sentence": 0}, {"word": 0}
    out: list[BareTuple] = []
    for s in sentences:
        out += [BareTuple(row, words) for row in process(BareTuple((s,), fields)) or ()]
    return out


def executed(cls: Callable[[], Bolt], tuples: Sequence[BareTuple]) -> BareCollector:
    """``cls``'s ``execute`` over ``tuples``; its collector, with what it emitted."""
    b, collector = bolt(cls)
    execute: Callable[[Any], None] = b.execute
    for t in tuples:
        execute(t)
    return collector


def chain_cpu(stages: Sequence[type[Bolt]], splitter: Callable[[], BasicBolt],
              sentences: Sequence[str]) -> float:
    """CPU seconds for the split and then each stage, each over the one before's emits as
    tuples of its declared fields."""
    t0 = time.process_time()
    tuples = split(splitter, sentences)
    for k, cls in enumerate(stages):
        collector = executed(cls, tuples)
        if k + 1 < len(stages):
            fields = {f: i for i, f in enumerate(cls.outputs["default"])}
            tuples = [BareTuple(v, fields) for v, _ in collector.emitted]
    return time.process_time() - t0
