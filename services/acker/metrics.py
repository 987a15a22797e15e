"""The acker's Prometheus metrics: the ``__acker`` throughput figures of the dashboards."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from squall.core.error_reports import ErrorReports
from squall.core.records import RecordKind
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

    def count_records(self, kinds: list[int]) -> None:
        for k in RecordKind:
            if kinds[k]:
                self._kind_children[k].inc(kinds[k])
