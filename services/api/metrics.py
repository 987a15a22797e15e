"""The API's own /metrics: requests, leadership, topologies by status, live workers."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from services.api.control import Control
from services.api.views import live_processes
from squall.core.control.assignment import Kind
from squall.core.control.lifecycle import Status


class ClusterCollector(Collector):
    """Read at scrape time from ZooKeeper, so every replica reports the same numbers."""

    def __init__(self, control: Control) -> None:
        self.control = control

    def collect(self) -> Iterator[Metric]:
        lead = GaugeMetricFamily("squall_api_leader", "1 if this replica is the leader")
        lead.add_metric([], 1.0 if self.control.leading.is_set() else 0.0)
        yield lead
        up = GaugeMetricFamily("squall_api_zookeeper_connected",
                               "1 while the ZooKeeper session is CONNECTED")
        up.add_metric([], 1.0 if self.control.state == "CONNECTED" else 0.0)
        yield up
        try:
            recs = self.control.store.list()
            workers = self.control.workers()
        except Exception:  # ZooKeeper unavailable: the two gauges above say so
            return
        topo = GaugeMetricFamily("squall_topologies", "Topologies by status", labels=["status"])
        for status, n in sorted(Tally(str(r.lifecycle.status) for r in recs).items()):
            topo.add_metric([status], n)
        yield topo
        wk = GaugeMetricFamily("squall_workers", "Live workers by kind", labels=["kind"])
        live = Tally(str(w.worker.kind) for w in workers)
        for kind in sorted(set(live) | {str(k) for k in Kind}):  # 0 for a kind none is left of
            wk.add_metric([kind], live[kind])
        yield wk
        procs = GaugeMetricFamily(
            "squall_component_processes", "Processes running a component of a topology that "
            "is not being killed (neither stopping nor in a crash loop)",
            labels=["topology", "component"])
        for rec in recs:
            if rec.lifecycle.status is not Status.KILLED:
                for comp, n in sorted(live_processes(rec, workers).items()):
                    procs.add_metric([rec.id, comp], n)
        yield procs


class ApiMetrics:
    def __init__(self, registry: CollectorRegistry, control: Control) -> None:
        self.registry = registry
        ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory...
        self.requests = Counter("squall_api_requests_total", "HTTP requests",
                                ["method", "route", "status"], registry=registry)
        self.latency = Histogram("squall_api_request_duration_seconds", "HTTP request duration",
                                 ["method", "route"], registry=registry)
        registry.register(ClusterCollector(control))
