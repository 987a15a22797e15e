"""Bolts that misbehave on purpose, to show (and test) replay and timeouts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from squall.bolt import BasicBolt, Bolt
from squall.tuples import Tuple


class FailEveryKth(BasicBolt):
    """Raises on sentences whose number is a multiple of ``k`` - the first time it sees them."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.k = int(conf.get("k", 5))
        self.seen: set[str] = set()

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        text = str(t[0])
        n = int(text.split()[-1])
        if n % self.k == 0 and text not in self.seen:
            self.seen.add(text)
            raise RuntimeError(f"sentence {n} fails once")
        return [(w,) for w in text.split()]


class ForgetEveryKth(Bolt):
    """Never acks sentences whose number is a multiple of ``k`` the first time: they time out."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.k = int(conf.get("k", 5))
        self.seen: set[str] = set()

    def execute(self, t: Tuple) -> None:
        text = str(t[0])
        n = int(text.split()[-1])
        if n % self.k == 0 and text not in self.seen:
            self.seen.add(text)
            return  # neither acked nor failed: the acker times the tree out
        for w in text.split():
            self.collector.emit((w,), t)
        self.collector.ack(t)
