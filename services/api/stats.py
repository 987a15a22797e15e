"""Storm UI's statistics, from the workers' Prometheus endpoints.

The API scrapes the ``/metrics`` endpoints the workers register for their
processes and sums them per topology and component. The window is the
processes' lifetime (``:all-time``): counters restart with a process, and the
API keeps no history of its own - Prometheus does, for real windows.
"""

from __future__ import annotations

import math
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, dict[str, str], float]


def scrape(urls: Iterable[str], timeout_s: float) -> tuple[list[Sample], list[str]]:
    """Every sample of every endpoint, and the endpoints that did not answer."""
    urls = sorted(set(urls))

    def one(url: str) -> list[Sample] | None:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as r:
                text = r.read().decode()
        except (OSError, ValueError):
            return None
        return [(s.name, dict(s.labels), float(s.value))
                for fam in text_string_to_metric_families(text) for s in fam.samples]

    if not urls:
        return [], []
    with ThreadPoolExecutor(min(16, len(urls))) as pool:
        got = list(pool.map(one, urls))
    samples = [s for g in got if g for s in g]
    return samples, [u for u, g in zip(urls, got, strict=True) if g is None]


@dataclass
class ComponentStats:
    counters: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    buckets: dict[float, float] = field(default_factory=lambda: defaultdict(float))
    latency_sum: float = 0.0
    latency_count: float = 0.0

    def quantile(self, q: float) -> float | None:
        """From the histogram buckets, interpolated as Prometheus's histogram_quantile does."""
        if not self.latency_count:
            return None
        bounds = sorted(self.buckets)
        rank = q * self.buckets[math.inf]
        prev_b, prev_c = 0.0, 0.0
        for b in bounds:
            c = self.buckets[b]
            if c >= rank:
                if math.isinf(b):
                    return prev_b
                return prev_b + (b - prev_b) * ((rank - prev_c) / (c - prev_c) if c > prev_c
                                                else 0.0)
            prev_b, prev_c = b, c
        return prev_b

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


def aggregate(samples: Sequence[Sample], topology: str) -> dict[str, ComponentStats]:
    """Per component of ``topology``: the summed statistics (the acker as ``__acker``)."""
    out: dict[str, ComponentStats] = defaultdict(ComponentStats)
    for name, labels, value in samples:
        if labels.get("topology") != topology:
            continue
        comp = labels.get("component", "__acker" if name.startswith("squall_acker") else "")
        st = out[comp]
        if name in _SUMMED:
            st.counters[_SUMMED[name]] += value
        elif name == "squall_acker_records_total":
            st.counters[f"{labels.get('kind', '')}_records"] += value
            st.counters["records"] += value
        elif name == "squall_acker_trees_total":
            st.counters[f"trees_{labels.get('outcome', '').lower()}"] += value
        elif name.endswith("_bucket") and name.removesuffix("_bucket") in _LATENCY:
            st.buckets[float(labels["le"])] += value
        elif name.endswith("_sum") and name.removesuffix("_sum") in _LATENCY:
            st.latency_sum += value
        elif name.endswith("_count") and name.removesuffix("_count") in _LATENCY:
            st.latency_count += value
    return dict(out)
