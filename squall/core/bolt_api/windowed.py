"""Windowed bolts (Storm's ``BaseWindowedBolt``): ``execute`` sees a window of tuples.

The window's shape is the bolt's configuration (:mod:`squall.core.topology.windows`); the
window manager (:mod:`squall.core.tasks.windows`) keeps its tuples in the task's state, so
a window follows its task between Spark's Python workers and survives restarts.

Reliability, as in Storm: the window acks its tuples, each once no later window can hold
it, so a tuple's tree stays open while the window needs it. What ``execute`` emits without
anchors is anchored to every tuple of the window (Storm's ``WindowedOutputCollector``);
name anchors to anchor to fewer. ``fail`` fails a tuple: it leaves the window and its
source message is replayed. An exception in ``execute`` fails every tuple of the window.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from squall.core.bolt_api.bolt import OutputCollector, TaskContext
from squall.core.errors import UsageError
from squall.core.reliability.tuples import DEFAULT_STREAM, Tuple


class TupleWindow:
    """One window: its tuples, those new since the last window and those that left it
    (Storm's ``TupleWindow``). Timestamps are milliseconds; None for a count window."""

    def __init__(self, tuples: Sequence[Tuple], new: Sequence[Tuple], expired: Sequence[Tuple],
                 start_ms: int | None = None, end_ms: int | None = None) -> None:
        self._tuples, self._new, self._expired = list(tuples), list(new), list(expired)
        self.start_timestamp, self.end_timestamp = start_ms, end_ms

    def get(self) -> list[Tuple]:
        """The window's tuples, oldest first."""
        return self._tuples

    def get_new(self) -> list[Tuple]:
        """Its tuples that were in no window before."""
        return self._new

    def get_expired(self) -> list[Tuple]:
        """The tuples of the last window that are not in this one (acked already: do not
        anchor to them)."""
        return self._expired

    def __iter__(self) -> Iterator[Tuple]:
        return iter(self._tuples)

    def __len__(self) -> int:
        return len(self._tuples)

    def __repr__(self) -> str:
        return (f"TupleWindow({len(self._tuples)} tuples, {len(self._new)} new, "
                f"{len(self._expired)} expired, [{self.start_timestamp}, {self.end_timestamp}))")


class WindowedOutputCollector(OutputCollector):
    """A windowed bolt's collector: emits anchor to the window unless told otherwise, and
    the window does the acking."""

    def __init__(self, sink: Any) -> None:
        super().__init__(sink)
        self.window: Sequence[Tuple] = ()

    def emit(self, values: Sequence[Any], anchors: Tuple | Sequence[Tuple] | None = None,
             stream: str = DEFAULT_STREAM) -> None:
        super().emit(values, self.window if anchors is None else anchors, stream)

    def emit_direct(self, task: int, values: Sequence[Any],
                    anchors: Tuple | Sequence[Tuple] | None = None,
                    stream: str = DEFAULT_STREAM) -> None:
        super().emit_direct(task, values, self.window if anchors is None else anchors, stream)

    def ack(self, t: Tuple) -> None:
        raise UsageError("a windowed bolt's tuples are acked by their window, when no later "
                         "window holds them: do not ack them")


class WindowedBolt:
    """Storm's ``BaseWindowedBolt``: override :meth:`execute`, which gets each window."""

    outputs: ClassVar[Mapping[str, Sequence[str]]] = {DEFAULT_STREAM: ()}
    #: A windowed bolt's task state is its window; it keeps nothing else across batches.
    stateful: ClassVar[bool] = False

    def prepare(self, conf: Mapping[str, Any], context: TaskContext,
                collector: OutputCollector) -> None:
        self.conf = conf
        self.context = context
        self.collector = collector

    def execute(self, window: TupleWindow) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass
