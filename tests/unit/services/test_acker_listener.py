"""The acker's metrics are one listener of what the service observes: each event becomes
the series the dashboards and alerts read."""

from __future__ import annotations

import math

import numpy as np
from prometheus_client import CollectorRegistry

from services.acker.listener import AckerListener
from services.acker.metrics import AckerMetrics
from squall.core.reliability.records import RecordKind


def test_each_event_becomes_its_series() -> None:
    reg = CollectorRegistry()
    m = AckerMetrics(reg, "wc")
    listener: AckerListener = m
    kinds = [0] * (max(RecordKind) + 1)  # indexed by the kind
    kinds[RecordKind.ACK] = 7
    listener.consumed(3)
    listener.applied(kinds)
    listener.decided({"acked": 4, "failed": 1, "timed_out": 0}, 2, np.array([0.1, 0.2]))
    listener.timeout_clock(1, float("nan"))
    listener.bad_record(1, "squall.wc.acker[1]@9", "not an acker batch", 1_000)
    listener.undelivered()
    listener.committed(1, 120, 5, 4096, 2, None)

    def value(name: str, **labels: str) -> float | None:
        return reg.get_sample_value(name, {"topology": "wc", **labels})

    assert value("squall_acker_messages_total") == 3
    assert value("squall_acker_records_total", kind="ack") == 7
    assert value("squall_acker_trees_total", outcome="acked") == 4
    assert value("squall_acker_trees_total", outcome="failed") == 1
    assert value("squall_acker_resets_total") == 2
    assert value("squall_acker_complete_latency_seconds_count") == 2
    assert math.isnan(value("squall_acker_timeout_clock_delay_seconds", task="1") or 0.0)
    assert value("squall_acker_bad_records_total") == 1
    assert value("squall_acker_delivery_errors_total") == 1
    assert (value("squall_acker_watermark_offset", task="1"),
            value("squall_acker_pending_trees", task="1"),
            value("squall_acker_pending_bytes", task="1"),
            value("squall_acker_orphans_expired_total")) == (120, 5, 4096, 2)
    assert value("squall_acker_lag_messages", task="1") is None  # not known: not set
    (err,) = m.errors.all()
    assert (err.component, err.error, err.task) == (
        "__acker", "bad record at squall.wc.acker[1]@9: not an acker batch", 1)
