"""Prometheus helpers shared by the services.

Latencies arrive a numpy array at a time (tens of thousands of trees a
second); :class:`BulkHistogram` counts them with one ``np.searchsorted`` per
batch instead of one ``observe()`` call per value, and is exposed as an
ordinary Prometheus histogram.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

#: Complete-latency buckets, seconds: Spark micro-batches make 0.1 s - 10 s the interesting
#: range, and fine there, so quantiles are not interpolations across a factor of 2.5.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8,
                   0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 30.0, 60.0,
                   120.0)


class BulkHistogram(Collector):
    """A labelled histogram fed with arrays of observations."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str],
                 buckets: Sequence[float] = LATENCY_BUCKETS,
                 registry: CollectorRegistry | None = None) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._bounds = np.asarray(sorted(buckets), np.float64)
        self._lock = threading.Lock()
        self._series: dict[tuple[str, ...], tuple[npt.NDArray[np.int64], list[float]]] = {}
        if registry is not None:
            registry.register(self)

    def observe_many(self, values: npt.ArrayLike, *labels: str) -> None:
        v = np.asarray(values, np.float64)
        if v.size == 0:
            return
        # Bucket i counts values <= bound i; the last one is +Inf.
        idx = np.searchsorted(self._bounds, v, side="left")
        counts = np.bincount(idx, minlength=len(self._bounds) + 1)
        with self._lock:
            series = self._series.get(labels)
            if series is None:
                series = self._series[labels] = (np.zeros(len(self._bounds) + 1, np.int64), [0.0])
            series[0][:] += counts
            series[1][0] += float(v.sum())

    def collect(self) -> Iterator[Metric]:
        fam = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            for labels, (counts, total) in self._series.items():
                cum = np.cumsum(counts)
                buckets = [(_fmt(b), float(c)) for b, c in zip(self._bounds, cum[:-1], strict=True)]
                buckets.append(("+Inf", float(cum[-1])))
                fam.add_metric(list(labels), buckets, total[0])
        yield fam

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)


def _fmt(bound: float) -> str:
    return repr(float(bound))
