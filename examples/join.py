"""Multi-anchoring: a per-batch aggregate anchored to all its inputs (a join of trees)."""

from __future__ import annotations

from typing import Any, ClassVar

from squall.bolt import Bolt
from squall.tuples import Tuple


class BatchTotal(Bolt):
    """Buffers ``size`` inputs, emits their total anchored to every one, then acks them all.

    The total belongs to every input's tuple tree: none completes until the
    total is processed downstream, and a failure of the total fails them all.
    """

    outputs: ClassVar = {"default": ("total", "n")}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.size = int(conf.get("size", 3))
        self.buffer: list[Tuple] = []

    def execute(self, t: Tuple) -> None:
        self.buffer.append(t)
        if len(self.buffer) >= self.size:
            total = sum(int(x[0]) for x in self.buffer)
            self.collector.emit((total, len(self.buffer)), self.buffer)
            for x in self.buffer:
                self.collector.ack(x)
            self.buffer = []


class LogTotal(Bolt):
    """Acks each total (the end of the trees)."""

    outputs: ClassVar = {"default": ()}

    def execute(self, t: Tuple) -> None:
        self.collector.ack(t)
