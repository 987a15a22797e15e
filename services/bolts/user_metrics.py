"""The bolts' own metrics (squall/core/bolt_api/metrics.py) on the bolts job's ``/metrics``:
what each task's micro-batches report, summed per task, as ``squall_user_<name>`` with the
topology, component and task labels.

A name one component registers as a counter and another as a gauge cannot be one
Prometheus metric: the first kind seen keeps it, the other is left out with a warning.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

from squall.core.bolt_api.metrics import EXPORT_PREFIX as PREFIX
from squall.core.bolt_api.metrics import HistogramDelta, MetricsDelta

log = logging.getLogger("squall.bolts")
LABELS = ["topology", "component", "task"]


class UserMetricsCollector(Collector):
    def __init__(self, topology: str) -> None:
        self.topology = topology
        self._lock = threading.Lock()
        self._kinds: dict[str, str] = {}
        self._counters: dict[tuple[str, str, int], float] = {}
        self._gauges: dict[tuple[str, str, int], float] = {}
        self._histograms: dict[tuple[str, str, int], HistogramDelta] = {}

    def add(self, component: str, task: int, d: MetricsDelta) -> None:
        with self._lock:
            for name, v in d.counters.items():
                if self._kind(name, "counter", component):
                    k = (name, component, task)
                    self._counters[k] = self._counters.get(k, 0.0) + v
            for name, g in d.gauges.items():
                if self._kind(name, "gauge", component):
                    self._gauges[(name, component, task)] = g
            for name, h in d.histograms.items():
                if self._kind(name, "histogram", component):
                    k = (name, component, task)
                    acc = MetricsDelta(histograms={name: self._histograms[k]}) \
                        if k in self._histograms else MetricsDelta()
                    acc.add(MetricsDelta(histograms={name: h}))
                    self._histograms[k] = acc.histograms[name]

    def _kind(self, name: str, kind: str, component: str) -> bool:
        was = self._kinds.setdefault(name, kind)
        if was != kind:
            log.warning("bolt %r's %s %r is left out of /metrics: %s%s is a %s already",
                        component, kind, name, PREFIX, name, was)
        return was == kind

    def collect(self) -> Iterator[Any]:
        with self._lock:
            counters, gauges = dict(self._counters), dict(self._gauges)
            histograms = dict(self._histograms)
        fams: dict[str, Any] = {}
        for (name, comp, task), v in sorted(counters.items()):
            fam = fams.setdefault(name, CounterMetricFamily(
                PREFIX + name, f"bolt counter {name}", labels=LABELS))
            fam.add_metric([self.topology, comp, str(task)], v)
        for (name, comp, task), v in sorted(gauges.items()):
            fam = fams.setdefault(name, GaugeMetricFamily(
                PREFIX + name, f"bolt gauge {name}", labels=LABELS))
            fam.add_metric([self.topology, comp, str(task)], v)
        for (name, comp, task), h in sorted(histograms.items()):
            fam = fams.setdefault(name, HistogramMetricFamily(
                PREFIX + name, f"bolt histogram {name}", labels=LABELS))
            cumulative, total = [], 0
            for bound, n in zip([*map(str, h.buckets), "+Inf"], h.counts, strict=True):
                total += n
                cumulative.append((bound, float(total)))
            fam.add_metric([self.topology, comp, str(task)], cumulative, h.sum)
        yield from fams.values()
