"""The spout's metrics are one listener of what the service observes: each event becomes
the series the dashboards and alerts read."""

from __future__ import annotations

import numpy as np
from prometheus_client import CollectorRegistry

from services.spout.listener import SpoutListener
from services.spout.metrics import SpoutMetrics


def test_each_event_becomes_its_series() -> None:
    reg = CollectorRegistry()
    m = SpoutMetrics(reg, "wc", "sentences")
    listener: SpoutListener = m
    listener.emitted(0, emitted=10, replayed=2, recovered=1, undecodable=1, pending=9)
    listener.settled(6, np.array([100, 300], np.int64), {"timeout": 2, "failed": 0}, 1)
    listener.bad_results(0, "squall.wc.results[0]@5", "truncated", 1_000)
    listener.dead_lettering(0, "src[1]@7", "failed after 6 attempts", 2_000)
    listener.dead_lettered()
    listener.unpaused(0, 1.5)
    listener.committed("src", 1, 40, 3)
    listener.committed("src", 0, 12, None)

    def value(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, {"topology": "wc", "component": "sentences",
                                           **labels})

    assert (value("squall_spout_emitted_total"), value("squall_spout_replayed_total"),
            value("squall_spout_recovered_total"), value("squall_spout_bad_records_total"),
            value("squall_spout_pending", task="0")) == (10, 2, 1, 1, 9)
    assert value("squall_spout_acked_total") == 6
    assert value("squall_spout_complete_latency_seconds_count") == 2
    assert value("squall_spout_failed_total", reason="timeout") == 2
    assert value("squall_spout_failed_total", reason="failed") == 0
    assert value("squall_spout_stale_results_total") == 1
    assert value("squall_spout_dead_lettered_total") == 1
    assert value("squall_spout_paused_seconds_total", task="0") == 1.5
    assert (value("squall_spout_committed_offset", topic="src", partition="1"),
            value("squall_spout_lag", topic="src", partition="1")) == (40, 3)
    assert value("squall_spout_committed_offset", topic="src", partition="0") == 12
    assert value("squall_spout_lag", topic="src", partition="0") is None
    assert [(e.error, e.task) for e in m.errors.all()] == [
        ("bad result batch at squall.wc.results[0]@5: truncated", 0),
        ("dead-lettered src[1]@7: failed after 6 attempts", 0)]
