"""Storm UI's statistics, from the workers' Prometheus endpoints.

The API scrapes the ``/metrics`` endpoints the workers register for their
processes and sums them per topology and component. The window is the
processes' lifetime (``:all-time``): counters restart with a process, and the
API keeps no history of its own - Prometheus does, for real windows.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from squall.core.bolt_api.metrics import EXPORT_PREFIX
from squall.core.control.error_reports import ErrorReport, parse_reports
from squall.core.control.history import LE, histogram_quantile
from squall.core.errors import EndpointRefused, ProcessUnavailable, WireFormatError
from squall.endpoint_fetch import Endpoints

log = logging.getLogger("squall.api")

Sample = tuple[str, dict[str, str], float]


@dataclass(frozen=True)
class Scrape:
    """One endpoint's answer: its samples (None: it did not answer) and its last errors."""

    samples: list[Sample] | None
    errors: list[ErrorReport] = field(default_factory=list)


def scrape(endpoints: Mapping[str, str], fetch: Endpoints) -> dict[str, Scrape]:
    """Every endpoint's ``/metrics`` and, beside it, its ``/errors``; ``endpoints``: each URL
    with the host its worker registered as (no other host is asked)."""
    def one(url: str) -> Scrape:
        host = endpoints[url]
        try:
            text = fetch.ok(url, host).decode()
        except EndpointRefused as e:
            _warn_once(str(e))
            return Scrape(None)
        except (ProcessUnavailable, ValueError):
            return Scrape(None)
        samples = [(s.name, dict(s.labels), float(s.value))
                   for fam in text_string_to_metric_families(text) for s in fam.samples]
        errors: list[ErrorReport] = []
        if url.endswith("/metrics"):
            try:
                errors = parse_reports(fetch.ok(url.removesuffix("/metrics") + "/errors", host))
            except (ProcessUnavailable, ValueError, WireFormatError) as e:  # an older process
                log.debug("no error reports from %s: %s", url, e)
        return Scrape(samples, errors)

    urls = sorted(endpoints)
    if not urls:
        return {}
    with ThreadPoolExecutor(min(16, len(urls))) as pool:
        return dict(zip(urls, pool.map(one, urls), strict=True))


_warned: set[str] = set()


def _warn_once(msg: str) -> None:
    """A refused endpoint is logged once, not on every scrape (a bounded memory of them)."""
    if msg not in _warned and len(_warned) < 1000:
        _warned.add(msg)
        log.warning("%s", msg)


@dataclass(frozen=True)
class ReportedError:
    """A process's reported error and where the process runs (Storm's errorHost, -Port)."""

    report: ErrorReport
    host: str
    port: int
    url: str


@dataclass
class ComponentStats:
    counters: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    buckets: dict[float, float] = field(default_factory=lambda: defaultdict(float))
    latency_sum: float = 0.0
    latency_count: float = 0.0

    def quantile(self, q: float) -> float | None:
        """From the histogram buckets, interpolated as Prometheus's histogram_quantile does."""
        return histogram_quantile(q, self.buckets) if self.latency_count else None

    def latency_ms(self) -> float | None:
        return 1000 * self.latency_sum / self.latency_count if self.latency_count else None


# Sample name -> the statistic it feeds (counters and gauges are summed over tasks).
_SUMMED = {
    "squall_spout_emitted_total": "emitted", "squall_spout_acked_total": "acked",
    "squall_spout_failed_total": "failed", "squall_spout_replayed_total": "replayed",
    "squall_spout_dead_lettered_total": "dead_lettered", "squall_spout_pending": "pending",
    "squall_spout_lag": "lag", "squall_acker_pending_trees": "pending",
    "squall_acker_messages_total": "messages", "squall_bolt_query_active": "active",
    "squall_bolt_batches_total": "batches", "squall_bolt_input_rows_total": "rows",
    "squall_bolt_batch_duration_seconds_sum": "batch_seconds",
    "squall_bolt_batch_duration_seconds_count": "batches_timed",
    "squall_bolt_executed_total": "executed", "squall_bolt_emitted_total": "emitted",
    "squall_bolt_acked_total": "acked", "squall_bolt_failed_total": "failed",
    "squall_bolt_errors_total": "errors", "squall_bolt_execute_seconds_total": "execute_seconds",
}
_LATENCY = ("squall_spout_complete_latency_seconds", "squall_acker_complete_latency_seconds")
_SPOUT_BUCKETS = "squall_spout_complete_latency_seconds_bucket"
#: How the bolts' own metrics are named among a component's statistics.
USER = "user_"


#: The statistics that only grow (in a process's life): they have windows.
COUNTERS = frozenset({
    "emitted", "acked", "failed", "replayed", "dead_lettered", "messages", "batches", "rows",
    "batch_seconds", "batches_timed", "executed", "errors", "execute_seconds", "records",
    "latency_sum", "latency_count"})


def is_counter(stat: str) -> bool:
    """Whether a statistic only grows in a process's life (it has windows); else a gauge."""
    return stat in COUNTERS or stat.startswith("trees_") or stat.endswith("_records") or \
        (stat.startswith(USER) and stat.endswith(("_total", "_sum", "_count")))


def statistic(name: str, labels: dict[str, str]) -> tuple[str, list[str]] | None:
    """A sample's component (the acker's as ``__acker``) and the statistics it adds to
    (summed over tasks); None for a sample that feeds none (a latency bucket included)."""
    comp = labels.get("component", "__acker" if name.startswith("squall_acker") else "")
    if name in _SUMMED:
        return comp, [_SUMMED[name]]
    if name == "squall_acker_records_total":
        return comp, [f"{labels.get('kind', '')}_records", "records"]
    if name == "squall_acker_trees_total":
        return comp, [f"trees_{labels.get('outcome', '').lower()}"]
    if name.startswith(EXPORT_PREFIX) and not name.endswith("_bucket"):
        # a bolt's own metric (squall/core/bolt_api/metrics.py), summed over its tasks
        return labels.get("component", ""), [USER + name.removeprefix(EXPORT_PREFIX)]
    for suffix, stat in (("_sum", "latency_sum"), ("_count", "latency_count")):
        if name.endswith(suffix) and name.removesuffix(suffix) in _LATENCY:
            return comp, [stat]
    return None


def aggregate(samples: Sequence[Sample], topology: str) -> dict[str, ComponentStats]:
    """Per component of ``topology``: the summed statistics (the acker as ``__acker``)."""
    out: dict[str, ComponentStats] = defaultdict(ComponentStats)
    for name, labels, value in samples:
        if labels.get("topology") != topology:
            continue
        if name.endswith("_bucket") and name.removesuffix("_bucket") in _LATENCY:
            comp = labels.get("component", "__acker" if name.startswith("squall_acker") else "")
            out[comp].buckets[float(labels["le"])] += value
            continue
        got = statistic(name, labels)
        if got is None:
            continue
        st = out[got[0]]
        for stat in got[1]:
            if stat == "latency_sum":
                st.latency_sum += value
            elif stat == "latency_count":
                st.latency_count += value
            else:
                st.counters[stat] += value
    return dict(out)


def windowed(samples: Iterable[tuple[str, Sample]]
             ) -> list[tuple[Any, tuple[str, str, str], float]]:
    """``(endpoint, sample)`` pairs as :class:`squall.core.control.rolling.RollingTotals` series:
    ``(series id, (endpoint, component, statistic), value)``, counters only (the spouts'
    complete latency buckets among them, as ``latency_le_<bound>``)."""
    out: list[tuple[Any, tuple[str, str, str], float]] = []
    for url, (name, labels, value) in samples:
        if name == _SPOUT_BUCKETS:  # the complete latency over time (its chart)
            sid = (url, name, tuple(sorted(labels.items())))
            out.append((sid, (url, labels.get("component", ""), LE + labels.get("le", "")),
                        value))
            continue
        got = statistic(name, labels)
        if got is None:
            continue
        sid = (url, name, tuple(sorted(labels.items())))
        for stat in got[1]:
            if is_counter(stat):
                out.append(((sid, stat), (url, got[0], stat), value))
    return out
