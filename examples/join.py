"""Multi-anchoring: a per-batch aggregate anchored to all its inputs (a join of trees), and
a pairwise join of consecutive tuples."""

from __future__ import annotations

from typing import Any, ClassVar

from squall.bolt import Bolt
from squall.tuples import Tuple


class BatchTotal(Bolt):
    """Buffers ``size`` inputs, emits their total anchored to every one, then acks them all;
    on a tick tuple, the same for a buffer not yet full (instead of leaving its trees to time
    out when no more input comes).

    The total belongs to every input's tuple tree: none completes until the
    total is processed downstream, and a failure of the total fails them all.

    The buffer lives across micro-batches, so it is the task's state, not an
    attribute: Spark runs a task's micro-batches in whichever of its Python
    workers is idle, so an attribute would be split between them (half-filled
    buffers whose inputs time out) and lost on a restart.
    """

    outputs: ClassVar = {"default": ("total", "n")}
    stateful = True

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.size = int(conf.get("size", 3))

    def execute(self, t: Tuple) -> None:
        if t.is_tick:
            held: list[Tuple] = self.state.get("buffer", [])
            if held:
                self._total(held)
            return
        buffer: list[Tuple] = [*self.state.get("buffer", []), t]
        if len(buffer) < self.size:
            self.state.put("buffer", buffer)
            return
        self._total(buffer)

    def _total(self, buffer: list[Tuple]) -> None:
        total = sum(int(x[0]) for x in buffer)
        self.collector.emit((total, len(buffer)), buffer)
        for x in buffer:
            self.collector.ack(x)
        self.state.put("buffer", [])


class LogTotal(Bolt):
    """Acks each total (the end of the trees)."""

    outputs: ClassVar = {"default": ()}

    def execute(self, t: Tuple) -> None:
        self.collector.ack(t)


class PairWords(Bolt):
    """Joins each word with the one before it on its task: the pair is emitted anchored to
    both (multi-anchoring: it belongs to both words' trees), then the earlier word is acked;
    on a tick tuple a word still waiting is acked alone, so that no tree waits for a word
    that does not come.

    The waiting word is the task's state, for the reason :class:`BatchTotal` gives.
    """

    outputs: ClassVar = {"default": ("first", "second")}
    stateful = True

    def execute(self, t: Tuple) -> None:
        held: Tuple | None = self.state.get("held")
        if t.is_tick:
            if held is not None:
                self.collector.ack(held)
                self.state.put("held", None)
            return
        if held is not None:
            self.collector.emit((held[0], t[0]), [held, t])
            self.collector.ack(held)
        self.state.put("held", t)
