"""The bolts job's other processes on its /metrics: Spark's JVM and Python workers (CPU,
resident memory, open files, from /proc), the JVM's heap and garbage collection (its
management beans, through Py4J), and where its Spark UI is. Read at scrape time.

Names follow Prometheus' client_java (``jvm_memory_bytes_used``,
``jvm_gc_collection_seconds``), so JVM dashboards and queries users know apply.
Spark's Python workers come and go; the ``pid`` label names the one a series is about.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from squall import process_tree

log = logging.getLogger("squall.bolts.metrics")


class SparkProcesses(Collector):
    """The processes under this one (the driver itself is ``process_*``, Prometheus'
    process collector), and the JVM once :meth:`attach` gives the Spark session."""

    def __init__(self, topology: str, root_pid: int | None = None) -> None:
        self.topology = topology
        self.root_pid = os.getpid() if root_pid is None else root_pid
        self._jvm: Any = None
        self._ui: str | None = None

    def attach(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._ui = spark.sparkContext.uiWebUrl  # None with spark.ui.enabled=false

    def collect(self) -> Iterator[Metric]:
        labels = ["topology", "role", "pid"]
        cpu = CounterMetricFamily("squall_bolt_process_cpu_seconds",
                                  "CPU of the bolts job's JVM and Python workers", labels=labels)
        rss = GaugeMetricFamily("squall_bolt_process_resident_memory_bytes",
                                "Resident memory of the bolts job's JVM and Python workers",
                                labels=labels)
        fds = GaugeMetricFamily("squall_bolt_process_open_fds",
                                "Open files of the bolts job's JVM and Python workers",
                                labels=labels)
        count = GaugeMetricFamily("squall_bolt_processes", "The bolts job's processes by role",
                                  labels=["topology", "role"])
        roles: dict[str, int] = {"jvm": 0, "python_worker": 0}
        for p in process_tree.tree(self.root_pid)[1:]:
            if p.role not in roles:  # a helper the driver ran: not Spark's
                continue
            roles[p.role] += 1
            at = [self.topology, p.role, str(p.pid)]
            cpu.add_metric(at, p.cpu_s)
            rss.add_metric(at, p.rss_bytes)
            n = p.open_fds()
            if n is not None:
                fds.add_metric(at, n)
        for role, n in roles.items():
            count.add_metric([self.topology, role], n)
        yield from (cpu, rss, fds, count)
        if self._ui:
            ui = GaugeMetricFamily("squall_bolt_spark_ui_info", "The bolts job's Spark UI",
                                   labels=["topology", "url"])
            ui.add_metric([self.topology, self._ui], 1)
            yield ui
        if self._jvm is not None:
            yield from self._jvm_metrics()

    def _jvm_metrics(self) -> Iterator[Metric]:
        try:
            beans = self._jvm.java.lang.management.ManagementFactory
            memory = beans.getMemoryMXBean()
            areas = {"heap": memory.getHeapMemoryUsage(),
                     "nonheap": memory.getNonHeapMemoryUsage()}
            used = GaugeMetricFamily("jvm_memory_bytes_used", "Used bytes of a JVM memory area",
                                     labels=["area"])
            committed = GaugeMetricFamily("jvm_memory_bytes_committed",
                                          "Committed bytes of a JVM memory area",
                                          labels=["area"])
            limit = GaugeMetricFamily("jvm_memory_bytes_max",
                                      "Max bytes of a JVM memory area (-1: no limit)",
                                      labels=["area"])
            for area, usage in areas.items():
                used.add_metric([area], usage.getUsed())
                committed.add_metric([area], usage.getCommitted())
                limit.add_metric([area], usage.getMax())
            gc = SummaryMetricFamily("jvm_gc_collection_seconds",
                                     "Time the JVM spent in a garbage collector",
                                     labels=["gc"])
            for bean in beans.getGarbageCollectorMXBeans():
                gc.add_metric([bean.getName()], bean.getCollectionCount(),
                              bean.getCollectionTime() / 1000.0)
        except Exception as e:  # the JVM stopping or gone: its processes above say so
            log.debug("no JVM metrics: %s", e)
            return
        yield from (used, committed, limit, gc)
