"""The acker's Prometheus metrics: the ``__acker`` throughput figures of the dashboards, a
:class:`services.acker.listener.AckerListener`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge

from squall.core.control.error_reports import ErrorReports
from squall.core.reliability.records import RecordKind
from squall.core.topology.topics import ACKER_COMPONENT
from squall.metrics import BulkHistogram


class AckerMetrics:
    def __init__(self, registry: CollectorRegistry, topology: str,
                 errors: ErrorReports | None = None) -> None:
        self.topology = topology
        #: the last errors, served at /errors (Storm UI's lastError)
        self.errors = errors or ErrorReports()
        t = ["topology"]
        self.records = Counter("squall_acker_records_total",
                               "Acker records applied, by kind (init, ack, fail, reset)",
                               [*t, "kind"], registry=registry)
        self.trees = Counter("squall_acker_trees_total",
                             "Tuple trees decided, by outcome (acked, failed, timed_out)",
                             [*t, "outcome"], registry=registry)
        self.resets = Counter("squall_acker_resets_total",
                              "Timeout resets of known trees forwarded to spouts",
                              t, registry=registry)
        self.orphans = Counter("squall_acker_orphans_expired_total",
                               "Entries dropped at expiry whose init never arrived",
                               t, registry=registry)
        self.bad = Counter("squall_acker_bad_records_total",
                           "Malformed acker messages skipped and dead-lettered", t,
                           registry=registry)
        self.messages = Counter("squall_acker_messages_total",
                                "Kafka messages (record batches) consumed", t, registry=registry)
        self.delivery_errors = Counter("squall_acker_delivery_errors_total",
                                       "Results or dead letters Kafka did not accept", t,
                                       registry=registry)
        self.pending = Gauge("squall_acker_pending_trees", "Trees pending in the ledger",
                             [*t, "task"], registry=registry)
        self.pending_bytes = Gauge("squall_acker_pending_bytes",
                                   "Bytes of ledger state (the packed table)", [*t, "task"],
                                   registry=registry)
        self.watermark = Gauge("squall_acker_watermark_offset",
                               "Earliest acker-topic offset a pending tree still needs",
                               [*t, "task"], registry=registry)
        self.lag = Gauge("squall_acker_lag_messages",
                         "Messages of the acker partition not yet applied", [*t, "task"],
                         registry=registry)
        self.clock_delay = Gauge(
            "squall_acker_timeout_clock_delay_seconds",
            "How far the timeout clock is behind the wall clock: the bolts' backlog "
            "(message timeouts count only time the bolts could have processed a tuple; NaN "
            "until a bolts job reports its progress)", [*t, "task"], registry=registry)
        self.latency = BulkHistogram("squall_acker_complete_latency_seconds",
                                     "Time from a tree's first record to its completion",
                                     t, registry=registry)
        self._kind_children = {k: self.records.labels(topology, k.name.lower())
                               for k in RecordKind}
        for outcome in ("acked", "failed", "timed_out"):
            self.trees.labels(topology, outcome)
        self.resets.labels(topology)
        self.bad.labels(topology)

    # ----- AckerListener ----------------------------------------------------

    def consumed(self, messages: int) -> None:
        self.messages.labels(self.topology).inc(messages)

    def applied(self, kinds: list[int]) -> None:
        for k in RecordKind:
            if kinds[k]:
                self._kind_children[k].inc(kinds[k])

    def decided(self, outcomes: Mapping[str, int], resets: int,
                latencies_s: npt.NDArray[np.float64]) -> None:
        for label, c in outcomes.items():
            if c:
                self.trees.labels(self.topology, label).inc(c)
        if resets:
            self.resets.labels(self.topology).inc(resets)
        self.latency.observe_many(latencies_s, self.topology)

    def timeout_clock(self, task: int, delay_s: float) -> None:
        self.clock_delay.labels(self.topology, str(task)).set(delay_s)

    def bad_record(self, task: int, where: str, reason: str, now_ms: int) -> None:
        self.bad.labels(self.topology).inc()
        self.errors.report(ACKER_COMPONENT, f"bad record at {where}: {reason}", now_ms, task)

    def undelivered(self) -> None:
        self.delivery_errors.labels(self.topology).inc()

    def committed(self, task: int, watermark: int, pending: int, pending_bytes: int,
                  orphans: int, lag: int | None) -> None:
        t = str(task)
        self.watermark.labels(self.topology, t).set(watermark)
        self.pending.labels(self.topology, t).set(pending)
        self.pending_bytes.labels(self.topology, t).set(pending_bytes)
        self.orphans.labels(self.topology).inc(orphans)
        if lag is not None:
            self.lag.labels(self.topology, t).set(lag)
