"""The bolts job's metrics, from each query's progress reports (on the driver).

Per-tuple counts happen on the executors, in Spark's Python workers, which have
no /metrics of their own; the driver sees every micro-batch's rows and
duration through a streaming query listener (:meth:`BoltMetrics.listen`): sampling
``StreamingQuery.lastProgress`` would miss the micro-batches that end between samples.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.bolts.process_metrics import SparkProcesses
from services.bolts.user_metrics import UserMetricsCollector
from squall.core.control.error_reports import ErrorReports
from squall.core.reliability.clock import Clock
from squall.metrics import LATENCY_BUCKETS
from squall.wallclock import SystemClock

if TYPE_CHECKING:  # the report imports pyspark, which the driver loads later, on purpose
    from services.bolts.report import BatchReport


class BoltMetrics:
    def __init__(self, registry: CollectorRegistry, topology: str,
                 errors: ErrorReports | None = None, clock: Clock | None = None) -> None:
        self.topology = topology
        #: the bolts' last errors, served at /errors (Storm UI's lastError)
        self.errors_seen = errors or ErrorReports()
        self.clock = clock or SystemClock()
        base = ["topology", "component"]
        #: Spark's JVM and Python workers, and the JVM's heap once a session is attached
        self.processes = SparkProcesses(topology)
        registry.register(self.processes)
        self.active = Gauge("squall_bolt_query_active",
                            "1 while the bolt's Spark query runs", base, registry=registry)
        self.batches = Counter("squall_bolt_batches_total", "Micro-batches completed", base,
                               registry=registry)
        self.rows = Counter("squall_bolt_input_rows_total",
                            "Rows (tuple batches from the edge topics) read", base,
                            registry=registry)
        self.duration = Histogram("squall_bolt_batch_duration_seconds",
                                  "Micro-batch duration, read to commit", base,
                                  buckets=LATENCY_BUCKETS, registry=registry)
        self.batch_running = Gauge(
            "squall_bolt_batch_running_seconds",
            "How long the query's current micro-batch has run (0: none runs); the job stops "
            "past ten bolt deadlines (services/bolts/query_watch.py)", base, registry=registry)
        self.state_up = Gauge(
            "squall_bolt_state_database_up", "1 while the job's PostgreSQL state database "
            "takes a connection and a query (asked every 5 s); stateful tasks wait while it "
            "does not", ["topology"], registry=registry).labels(topology)
        self._seen: dict[str, int] = {}
        self.phases = Counter("squall_bolt_batch_phase_seconds_total",
                              "Micro-batch time by Spark phase (addBatch = the bolt tasks, "
                              "the rest is Spark's own)", [*base, "phase"], registry=registry)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, base, registry=registry)

        self.executed = counter("squall_bolt_executed_total", "Tuples executed")
        self.emitted = counter("squall_bolt_emitted_total", "Tuples emitted")
        self.acked = counter("squall_bolt_acked_total", "Input tuples acked")
        self.failed = counter("squall_bolt_failed_total", "Input tuples failed")
        self.errors = counter("squall_bolt_errors_total",
                              "Exceptions in bolt code (each fails its input)")
        self.bad = counter("squall_bolt_bad_records_total", "Undecodable edge messages")
        self.culprits = counter("squall_bolt_culprits_total",
                                "Source messages failed because a call on them killed or hung "
                                "the bolt's process (docs/poison.md)")
        self.sandboxes = counter("squall_bolt_sandboxes_total",
                                 "Processes of their own run to find such messages")
        self.fetch_retries = counter(
            "squall_bolt_fetch_retries_total",
            "Edge range reads that brought nothing for a while and were re-positioned")
        self.execute_seconds = counter("squall_bolt_execute_seconds_total",
                                       "Time the bolt's tasks spent in micro-batches")
        self.task_phases = Counter(
            "squall_bolt_task_phase_seconds_total",
            "The bolt tasks' time by phase: input (waiting for the micro-batch's ranges), "
            "read (reading them from Kafka), execute (decoding and the bolt), produce "
            "(encoding, to Kafka), flush (waiting for Kafka's confirmation)", [*base, "phase"],
            registry=registry)
        self.user = UserMetricsCollector(topology)
        registry.register(self.user)

    def started(self, component: str) -> None:
        lab = (self.topology, component)
        self.active.labels(*lab).set(1)
        # Every series exists from the start, at 0: a panel or alert reading it has data
        # before the first error (checked against a real Prometheus).
        for c in (self.batches, self.rows, self.executed, self.emitted, self.acked,
                  self.failed, self.errors, self.bad, self.fetch_retries,
                  self.culprits, self.sandboxes, self.execute_seconds):
            c.labels(*lab)
        self.duration.labels(*lab)

    def stopped(self, component: str) -> None:
        self.active.labels(self.topology, component).set(0)

    def progress(self, chain: Sequence[str], p: Any) -> None:
        """Count a query's progress report once (the same one is returned until the next
        batch), for each bolt of its chain: a fused bolt runs in the head's micro-batches.
        The rows read come with the tasks' reports (Spark's own count is of ranges)."""
        for component in chain:
            self._progress(component, p)

    def _progress(self, component: str, p: Any) -> None:
        if p is not None and not isinstance(p, dict):
            p = json.loads(p.json)  # PySpark 4: a StreamingQueryProgress
        if not p or "batchId" not in p:
            return
        bid = int(p["batchId"])
        if self._seen.get(component) == bid:
            return
        self._seen[component] = bid
        lab = (self.topology, component)
        self.batches.labels(*lab).inc()
        phases = p.get("durationMs") or {}
        ms = phases.get("triggerExecution")
        if ms is not None:
            self.duration.labels(*lab).observe(float(ms) / 1000)
        for phase, v in phases.items():
            self.phases.labels(*lab, phase).inc(float(v) / 1000)

    def listen(self, spark: Any, chains: Mapping[str, Sequence[str]]) -> Any:
        """Count every progress report of the queries named in ``chains`` (query name ->
        its chain of bolts) as Spark posts it; the listener, for ``removeListener``.

        Spark's Python listener interface, implemented directly: PySpark's
        ``StreamingQueryListener`` converts each event field by field, dozens of calls
        into the JVM per micro-batch, which shows in the complete latency. Here: the
        progress as JSON, two calls. Called on Spark's listener thread.
        """
        from pyspark.java_gateway import ensure_callback_server_started

        metrics = self

        class Progress:
            def onQueryStarted(self, jevent: Any) -> None:
                pass

            def onQueryProgress(self, jevent: Any) -> None:
                p = json.loads(jevent.progress().json())
                chain = chains.get(p.get("name"))
                if chain:
                    metrics.progress(chain, p)

            def onQueryIdle(self, jevent: Any) -> None:
                pass

            def onQueryTerminated(self, jevent: Any) -> None:
                pass

            class Java:
                implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

        sc = spark.sparkContext
        cast(Any, ensure_callback_server_started)(sc._gateway)  # untyped in PySpark
        listener = sc._jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
            Progress())
        spark._jsparkSession.streams().addListener(listener)
        return listener

    def report(self, rep: BatchReport) -> None:
        """A bolt's report of one micro-batch (services/bolts/report.py)."""
        lab = (self.topology, rep.component)
        for v, c in ((rep.records, self.rows), (rep.executed, self.executed),
                     (rep.emitted, self.emitted), (rep.acked, self.acked),
                     (rep.failed, self.failed),
                     (rep.error_count, self.errors), (rep.bad, self.bad),
                     (rep.fetch_retries, self.fetch_retries),
                     (rep.culprits, self.culprits), (rep.sandboxes, self.sandboxes),
                     (rep.seconds, self.execute_seconds)):
            if v > 0:
                c.labels(*lab).inc(v)
        for phase, v in rep.phases.items():
            if v > 0:
                self.task_phases.labels(*lab, phase).inc(v)
        for task, d in rep.user.items():
            self.user.add(rep.component, task, d)
        if rep.errors:
            now = self.clock.now_ms()
            for e in rep.errors:
                self.errors_seen.report(rep.component, e, now, rep.task)
