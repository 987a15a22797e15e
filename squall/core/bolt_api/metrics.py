"""A bolt's own metrics (Storm's ``TopologyContext.registerCounter`` / ``registerGauge`` /
``registerHistogram``): registered in ``prepare`` through the task's context, updated in
``execute``.

A task's micro-batches run in several Python workers, each with its own bolt and
registry, so a registry hands the bolts job what changed since it last asked
(:meth:`UserMetrics.take`): counters' increments, gauges' last values, histograms' new
observations. The job sums them per task and exports them on its ``/metrics`` as
``squall_user_<name>`` with the topology, component and task labels (counters end in
``_total``); the API sums them per component.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from squall.core.errors import UsageError

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,99}$")
#: What every bolt metric's exported name starts with.
EXPORT_PREFIX = "squall_user_"
#: Endings Prometheus gives counters' and histograms' samples: a name may not end in one,
#: so a sample's name says its kind.
_RESERVED = ("_total", "_sum", "_count", "_bucket", "_created", "_info")
#: Prometheus' default buckets (seconds, for timings).
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0)


class CounterMetric:
    """Only goes up (Storm's ``CountMetric``)."""

    def __init__(self) -> None:
        self._delta = 0.0

    def inc(self, n: float = 1.0) -> None:
        if n < 0 or not math.isfinite(n):
            raise UsageError(f"a counter goes up by a finite amount, not {n!r}")
        self._delta += n

    def take(self) -> float:
        out, self._delta = self._delta, 0.0
        return out


class GaugeMetric:
    """A value set now and then (Storm's ``AssignableMetric``)."""

    def __init__(self) -> None:
        self._value: float | None = None

    def set(self, v: float) -> None:
        self._value = float(v)

    def take(self) -> float | None:
        out, self._value = self._value, None
        return out


class HistogramMetric:
    """Observations counted in buckets (Storm's ``registerHistogram``)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = tuple(buckets)
        self._counts = [0] * (len(self.buckets) + 1)  # the last: above every bound
        self._sum = 0.0

    def observe(self, v: float) -> None:
        self._counts[bisect.bisect_left(self.buckets, v)] += 1
        self._sum += v

    update = observe  # Storm's (Dropwizard's) name

    def take(self) -> HistogramDelta | None:
        if not any(self._counts):
            return None
        out = HistogramDelta(self.buckets, tuple(self._counts), self._sum)
        self._counts, self._sum = [0] * len(self._counts), 0.0
        return out


@dataclass(frozen=True)
class HistogramDelta:
    buckets: tuple[float, ...]
    #: per bucket, not cumulative; one more than the bounds (above the last)
    counts: tuple[int, ...]
    sum: float


@dataclass
class MetricsDelta:
    """What a task's metrics did since the last take."""

    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramDelta] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.counters or self.gauges or self.histograms)

    def add(self, later: MetricsDelta) -> None:
        """``later`` after this one: counts summed, gauges replaced."""
        for k, v in later.counters.items():
            self.counters[k] = self.counters.get(k, 0.0) + v
        self.gauges.update(later.gauges)
        for k, h in later.histograms.items():
            was = self.histograms.get(k)
            self.histograms[k] = h if was is None or was.buckets != h.buckets else \
                HistogramDelta(h.buckets, tuple(a + b for a, b in zip(was.counts, h.counts,
                                                                       strict=True)),
                               was.sum + h.sum)


Metric = CounterMetric | GaugeMetric | HistogramMetric
_KINDS = {CounterMetric: "counter", GaugeMetric: "gauge", HistogramMetric: "histogram"}


class UserMetrics:
    """One task's registry in one Python worker."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}

    def counter(self, name: str) -> CounterMetric:
        got = self._register(name, CounterMetric, CounterMetric)
        assert isinstance(got, CounterMetric)
        return got

    def gauge(self, name: str) -> GaugeMetric:
        got = self._register(name, GaugeMetric, GaugeMetric)
        assert isinstance(got, GaugeMetric)
        return got

    def histogram(self, name: str, buckets: Sequence[float] = DEFAULT_BUCKETS) -> HistogramMetric:
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)) or \
                not all(math.isfinite(b) for b in bounds):
            raise UsageError(f"histogram {name!r}: buckets must be finite and increasing, "
                             f"got {list(buckets)}")
        got = self._register(name, HistogramMetric, lambda: HistogramMetric(bounds))
        assert isinstance(got, HistogramMetric)
        if got.buckets != bounds:
            raise UsageError(f"histogram {name!r} is registered with buckets "
                             f"{list(got.buckets)}, not {list(bounds)}")
        return got

    def _register(self, name: str, kind: type, make: Callable[[], Metric]) -> Metric:
        if not isinstance(name, str) or not _NAME.match(name) or name.endswith(_RESERVED):
            raise UsageError(f"metric name {name!r} must match {_NAME.pattern} and not end "
                             f"in {', '.join(_RESERVED)} (it becomes {EXPORT_PREFIX}<name>)")
        got = self._metrics.get(name)
        if got is None:
            got = self._metrics[name] = make()
        if not isinstance(got, kind):
            raise UsageError(f"metric {name!r} is registered as a "
                             f"{_KINDS[type(got)]}, not a {_KINDS[kind]}")
        return got

    def take(self) -> MetricsDelta:
        out = MetricsDelta()
        for name, m in self._metrics.items():
            if isinstance(m, CounterMetric):
                v = m.take()
                if v:
                    out.counters[name] = v
            elif isinstance(m, GaugeMetric):
                g = m.take()
                if g is not None:
                    out.gauges[name] = g
            else:
                h = m.take()
                if h is not None:
                    out.histograms[name] = h
        return out
