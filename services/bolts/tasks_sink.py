"""A query's bolt tasks run by a sink of the driver's own (``runtime/java/BatchSink.java``),
and what the driver does with their reports.

The sink runs the micro-batch's one planned job in the JVM (no Python callback, and the
batch's scan never becomes an RDD) and queues the tasks' reports; a thread of the Python
driver reads them and counts them into the bolts' metrics, off the micro-batch's way.
"""

from __future__ import annotations

import contextlib
import io
import logging
import struct
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from services.bolts.metrics import BoltMetrics

if TYPE_CHECKING:  # the report imports pyspark, which the driver loads later, on purpose
    from services.bolts.report import BatchReport

log = logging.getLogger("squall.bolts")
#: The sink's class (format), on the driver's class path (services/bolts/runtime/driver_classes.py).
FORMAT = "squall.spark.BatchSink"
#: How long the reports' reader waits for a micro-batch before it looks at ``stop``.
WAIT_MS = 500


def count_reports(chain: Sequence[str], batch_id: int, reports: Sequence[BatchReport],
                  metrics: BoltMetrics | None) -> int:
    """A micro-batch's task reports into the metrics, its errors logged; the tuples the
    chain's head executed."""
    from services.bolts.report import BatchReport

    executed = 0
    for component in chain:
        mine = [r for r in reports if r.component == component]
        rep = BatchReport.merged(component, mine)
        if component == chain[0]:
            executed = rep.executed
        if rep.error_count:
            log.warning("bolt %s batch %d: %d errors, last: %s", component, batch_id,
                        rep.error_count, rep.errors[-1] if rep.errors else "?")
        if metrics and mine:
            metrics.report(rep)
    return executed


#: A query's first micro-batches (with data) whose times are logged: start-up shows there.
FIRST_BATCHES_LOGGED = 3


class FirstBatches:
    """Logs the tasks' seconds of a query's first :data:`FIRST_BATCHES_LOGGED` micro-batches
    that had data."""

    def __init__(self, query: str) -> None:
        self.query, self.logged = query, 0

    def note(self, batch_id: int, executed: int, reports: Sequence[BatchReport]) -> None:
        if executed and self.logged < FIRST_BATCHES_LOGGED:
            self.logged += 1
            log.info("micro-batch %d of %s: %d tuples; its tasks' seconds: %s", batch_id,
                     self.query, executed,
                     [(r.component, r.task, round(r.seconds, 3)) for r in reports])


def writer(reader: Any, query: str, chain: Sequence[str], rdd: Any, batch_property: str,
           metrics: BoltMetrics | None, stop: threading.Event, lease: str = "") -> Any:
    """Query ``query``'s writer (before ``start()``) over ``reader``: its micro-batches run
    ``rdd`` (the chain's planned job, told its batch by ``batch_property``), each once the
    worker's lease file ``lease`` holds (squall/core/control/lease.py; "": none), and their
    reports a thread reads until ``stop``."""
    sink = reader.sparkSession.sparkContext._jvm.squall.spark.BatchSink
    tasks = sink.register(query, rdd._jrdd.rdd(), batch_property, lease)
    threading.Thread(target=_read_reports, daemon=True, name=f"reports-{query}",
                     args=(sink, tasks, query, chain, rdd._jrdd_deserializer, metrics,
                           stop)).start()
    return reader.writeStream.format(FORMAT).option("query", query)


def _read_reports(sink: Any, tasks: Any, query: str, chain: Sequence[str],
                  deserializer: Any, metrics: BoltMetrics | None,
                  stop: threading.Event) -> None:
    first = FirstBatches(query)
    while not stop.is_set():
        try:
            raw = tasks.take(WAIT_MS)
            dropped = int(tasks.dropped())
        except Exception as e:  # the driver is stopping: its JVM is gone
            if not stop.is_set():
                log.warning("query %s: its tasks' reports can no longer be read: %s", query, e)
            return
        if dropped:
            log.warning("query %s: %d micro-batches' task reports were not read in time and "
                        "are not counted in the metrics", query, dropped)
        if raw is None:
            continue
        try:
            data = bytes(raw)
            (batch_id,) = struct.unpack(">q", data[:8])
            reports = list(deserializer.load_stream(io.BytesIO(data[8:])))
            executed = count_reports(chain, batch_id, reports, metrics)
        except Exception as e:  # one batch's reports: the next ones are still counted
            log.warning("query %s: a micro-batch's task reports cannot be read: %s", query, e)
            continue
        first.note(batch_id, executed, reports)
    with contextlib.suppress(Exception):  # a JVM that is gone holds nothing any more
        sink.unregister(query, tasks)
