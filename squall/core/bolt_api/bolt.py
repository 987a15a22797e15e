"""The bolt APIs users write against.

- :class:`Bolt`, Storm's rich bolt: ``prepare`` / ``execute(tuple)`` /
  ``cleanup``, emitting through the collector with one anchor, several, or
  none, and acking / failing / resetting inputs itself;
- :class:`BasicBolt`: ``process(tuple)`` returns the rows to emit; they are
  anchored to the input and the input is acked for you; an exception fails it;
- :class:`BatchBolt`: vectorized, ``process(DataFrame) -> DataFrame`` over a
  whole micro-batch, or ``process_arrow(Table) -> Table`` without the conversions
  to pandas and back; each output row names its input row in ``__parent`` and
  is anchored to it; the inputs are acked after the batch (failed if it raises).

Output fields are declared per stream in the class attribute ``outputs``.

A bolt with ``stateful = True`` gets a :class:`~squall.core.bolt_api.state.KeyValueState`
through ``init_state`` (Storm's ``IStatefulBolt``), kept in ``self.state``: it
follows the task from Spark worker to worker and survives restarts. State kept
in other attributes lives in one Python worker only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from squall.core.bolt_api.metrics import (
    DEFAULT_BUCKETS,
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    UserMetrics,
)
from squall.core.reliability.tuples import DEFAULT_STREAM, Tuple

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from squall.core.bolt_api.state import KeyValueState

PARENT = "__parent"


@dataclass(frozen=True)
class TaskContext:
    topology: str
    component: str
    task: int
    parallelism: int
    #: the task's own metrics (register them in ``prepare``)
    metrics: UserMetrics = field(default_factory=UserMetrics, compare=False, repr=False)

    def register_counter(self, name: str) -> CounterMetric:
        """A counter exported as ``squall_user_<name>_total`` (Storm's ``registerCounter``)."""
        return self.metrics.counter(name)

    def register_gauge(self, name: str) -> GaugeMetric:
        """A gauge exported as ``squall_user_<name>``: its last value set."""
        return self.metrics.gauge(name)

    def register_histogram(self, name: str, buckets: Sequence[float] = DEFAULT_BUCKETS
                           ) -> HistogramMetric:
        """A histogram exported as ``squall_user_<name>`` with ``buckets`` (upper bounds)."""
        return self.metrics.histogram(name, buckets)


class OutputCollector:
    """Where a bolt's emits, acks and fails go; the executor behind it does the bookkeeping."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink

    def emit(self, values: Sequence[Any], anchors: Tuple | Sequence[Tuple] | None = None,
             stream: str = DEFAULT_STREAM) -> None:
        """Emit ``values`` on ``stream``; anchored to ``anchors`` (none: untracked)."""
        self._sink.emit(stream, values, _anchor_list(anchors), None)

    def emit_direct(self, task: int, values: Sequence[Any],
                    anchors: Tuple | Sequence[Tuple] | None = None,
                    stream: str = DEFAULT_STREAM) -> None:
        self._sink.emit(stream, values, _anchor_list(anchors), task)

    def ack(self, t: Tuple) -> None:
        self._sink.ack(t)

    def fail(self, t: Tuple) -> None:
        self._sink.fail(t)

    def reset_timeout(self, t: Tuple) -> None:
        self._sink.reset_timeout(t)

    def report_error(self, error: BaseException | str) -> None:
        self._sink.report_error(error)


def _anchor_list(anchors: Tuple | Sequence[Tuple] | None) -> list[Tuple]:
    if anchors is None:
        return []
    if isinstance(anchors, Tuple):
        return [anchors]
    return list(anchors)


class _Stateful:
    #: Whether the task's state is kept in a :class:`KeyValueState` (``self.state``).
    stateful: ClassVar[bool] = False

    def init_state(self, state: KeyValueState) -> None:
        """Called once after ``prepare`` with the task's state (Storm's ``initState``); it
        is brought up to date before every micro-batch."""
        self.state = state


class Bolt(_Stateful):
    """Storm's rich bolt. Override :meth:`execute`; ack or fail every input."""

    outputs: ClassVar[Mapping[str, Sequence[str]]] = {DEFAULT_STREAM: ()}

    def prepare(self, conf: Mapping[str, Any], context: TaskContext,
                collector: OutputCollector) -> None:
        self.conf = conf
        self.context = context
        self.collector = collector

    def execute(self, t: Tuple) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class BasicBolt(Bolt):
    """Anchors and acks for you: return the rows to emit on the default stream."""

    def process(self, t: Tuple) -> Iterable[Sequence[Any]] | None:
        raise NotImplementedError

    def execute(self, t: Tuple) -> None:
        rows = self.process(t)  # an exception here fails t (the executor catches it)
        for row in rows or ():
            self.collector.emit(row, t)
        self.collector.ack(t)


class BatchBolt(_Stateful):
    """Vectorized bolt: a micro-batch in as a DataFrame, output rows with their ``__parent``."""

    outputs: ClassVar[Mapping[str, Sequence[str]]] = {DEFAULT_STREAM: ()}

    def prepare(self, conf: Mapping[str, Any], context: TaskContext) -> None:
        self.conf = conf
        self.context = context

    def process(self, df: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    def process_arrow(self, table: pa.Table) -> pa.Table:
        """:meth:`process` over Arrow: implement this one instead to skip the conversions
        to pandas and back. In: the micro-batch's
        fields, ``__stream`` and ``__source`` (dictionary-encoded); out: the declared
        fields, ``__parent`` and, for more than one stream, ``__stream``."""
        raise NotImplementedError

    def cleanup(self) -> None:
        pass
