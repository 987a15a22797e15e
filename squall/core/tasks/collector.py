"""The collector a per-tuple bolt's task gives its bolt: Storm's ``OutputCollector``, with the
common emit and ack taken in one call each.

Most emits of a per-tuple bolt name one input as their anchor, on a stream with one plain
subscriber or none (:class:`~squall.core.tasks.emits.StreamPlan`); most acks are of a tuple
in one tree. Those go straight to the anchoring arithmetic and the stream's buffer: the
general path (squall/core/tasks/executor.py) costs a few calls more per emit, and a
per-tuple bolt emits and acks once or more per input. The rest take the general path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from squall.core.bolt_api.bolt import OutputCollector
from squall.core.reliability.tuples import DEFAULT_STREAM, Anchoring, Tuple
from squall.core.tasks.emits import NO_SLOT, EdgeBuffer, StreamPlan, slot_of
from squall.core.tasks.exec_result import ExecResult


class TaskCollector(OutputCollector):
    """A :class:`~squall.core.bolt_api.bolt.Bolt`'s collector in its task's executor."""

    def __init__(self, sink: Any, plans: Mapping[str, StreamPlan],
                 anchoring: Anchoring) -> None:
        super().__init__(sink)
        #: per stream taking the short path: its field count and its one subscriber's
        #: buffer (None: nobody subscribes)
        self._short: dict[str, tuple[int, EdgeBuffer | None]] = {
            s: (len(p.fields), p.only)
            for s, p in plans.items() if p.only is not None or not p.buffers}
        self._anch = anchoring
        #: the micro-batch's result (the executor sets it as a run begins)
        self.result = ExecResult()

    def emit(self, values: Sequence[Any], anchors: Tuple | Sequence[Tuple] | None = None,
             stream: str = DEFAULT_STREAM) -> None:
        short = self._short.get(stream)
        if short is not None and len(values) == short[0]:
            buf = short[1]
            if anchors.__class__ is Tuple:
                a: Tuple = anchors
                if buf is None:  # nobody subscribes: only the child's place in its tree
                    a._children += 1
                    self.result.emitted += 1
                    return
                if not a.settled:  # (else the general path says why it cannot anchor)
                    origin = a.origin
                    buf.rows.append((values, self._anch.emit_one(a), None, origin,
                                     NO_SLOT if origin is None else a.next_slot()))
                    self.result.emitted += 1
                    return
            elif anchors.__class__ is list and buf is not None:  # a join's
                buf.rows.append((values, self._anch.child_of(anchors), None,
                                 *slot_of(anchors)))
                self.result.emitted += 1
                return
        super().emit(values, anchors, stream)

    def ack(self, t: Tuple) -> None:
        res = self.result
        if self._anch.ack_into(t, res.ack_roots, res.ack_values):
            res.acked += 1
