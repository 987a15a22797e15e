"""The spout's Prometheus metrics, a :class:`services.spout.listener.SpoutListener`."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge

from squall.core.control.error_reports import ErrorReports
from squall.metrics import BulkHistogram


class SpoutMetrics:
    def __init__(self, registry: CollectorRegistry, topology: str, component: str,
                 errors: ErrorReports | None = None) -> None:
        self.labels = (topology, component)
        #: the last errors, served at /errors (Storm UI's lastError)
        self.errors = errors or ErrorReports()
        base = ["topology", "component"]

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, [*base, *extra], registry=registry)

        self.emitted_total = counter("squall_spout_emitted_total",
                                     "Source messages emitted as tuples")
        self.acked = counter("squall_spout_acked_total", "Source messages whose tree completed")
        self.failed = counter("squall_spout_failed_total", "Trees failed or timed out", ("reason",))
        self.replayed = counter("squall_spout_replayed_total", "Source messages emitted again")
        self.dead_lettered_total = counter("squall_spout_dead_lettered_total",
                                           "Source messages sent to the dead-letter topic")
        self.bad = counter("squall_spout_bad_records_total",
                           "Source messages the scheme could not decode")
        self.recovered = counter("squall_spout_recovered_total",
                                 "Offsets acked before a restart, not emitted again")
        self.stale = counter("squall_spout_stale_results_total",
                             "Results for roots no longer pending (duplicates)")
        self.paused = counter("squall_spout_paused_seconds_total",
                              "Time partitions spent paused by backpressure", ("task",))
        self.pending = Gauge("squall_spout_pending", "Trees pending", [*base, "task"],
                             registry=registry)
        self.committed_offset = Gauge("squall_spout_committed_offset", "Committed offset",
                               [*base, "topic", "partition"], registry=registry)
        self.lag = Gauge("squall_spout_lag", "High watermark minus committed offset",
                         [*base, "topic", "partition"], registry=registry)
        self.latency = BulkHistogram("squall_spout_complete_latency_seconds",
                                     "From emit to the tree's completion", base, registry=registry)
        # Every series exists from the start, at 0: a panel or alert reading it has data
        # before the first failure (checked against a real Prometheus).
        for c in (self.emitted_total, self.acked, self.replayed, self.dead_lettered_total, self.bad,
                  self.recovered, self.stale):
            c.labels(*self.labels)
        for reason in ("failed", "timeout", "backstop"):  # squall/core/tasks/spout_task.py
            self.failed.labels(*self.labels, reason)

    # ----- SpoutListener -----------------------------------------------------

    def emitted(self, task: int, emitted: int, replayed: int, recovered: int,
                undecodable: int, pending: int) -> None:
        lab = self.labels
        if undecodable:
            self.bad.labels(*lab).inc(undecodable)
        self.emitted_total.labels(*lab).inc(emitted)
        self.replayed.labels(*lab).inc(replayed)
        self.recovered.labels(*lab).inc(recovered)
        self.pending.labels(*lab, str(task)).set(pending)

    def settled(self, acked: int, latencies_ms: npt.NDArray[np.int64], failed: Mapping[str, int],
                stale: int) -> None:
        lab = self.labels
        if acked:
            self.acked.labels(*lab).inc(acked)
            self.latency.observe_many(np.asarray(latencies_ms) / 1000.0, *lab)
        for reason, n in failed.items():
            self.failed.labels(*lab, reason).inc(n)
        if stale:
            self.stale.labels(*lab).inc(stale)

    def bad_results(self, task: int, where: str, reason: str, now_ms: int) -> None:
        self.errors.report(self.labels[1], f"bad result batch at {where}: {reason}", now_ms,
                           task)

    def dead_lettering(self, task: int, where: str, reason: str, now_ms: int) -> None:
        self.errors.report(self.labels[1], f"dead-lettered {where}: {reason}", now_ms, task)

    def dead_lettered(self) -> None:
        self.dead_lettered_total.labels(*self.labels).inc()

    def unpaused(self, task: int, seconds: float) -> None:
        self.paused.labels(*self.labels, str(task)).inc(seconds)

    def committed(self, topic: str, partition: int, offset: int, lag: int | None) -> None:
        self.committed_offset.labels(*self.labels, topic, str(partition)).set(offset)
        if lag is not None:
            self.lag.labels(*self.labels, topic, str(partition)).set(lag)
