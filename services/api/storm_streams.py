"""Storm UI's ``/api/v1/topology/:id/metrics``: each component's numbers by stream.

Squall counts per component, not per stream (docs/decisions.md): a component's numbers
are given under its one output stream, or, with several, under their names joined by
commas; a bolt's input numbers under its input (component and stream), or its inputs
joined the same way.
"""

from __future__ import annotations

from typing import Any

from services.api.storm_views import (
    Numbers,
    joined_names,
    output_streams,
    storm_topology,
    window_pretty,
)
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.rolling import ALL_TIME


def topology_metrics(rec: TopologyRecord, now_ms: int, assignments: dict[str, WorkerAssignment],
                     numbers: Numbers, workers: list[WorkerInfo], window: str = ALL_TIME
                     ) -> dict[str, Any]:
    full = storm_topology(rec, now_ms, assignments, numbers, workers, None, window)
    spouts = []
    for sp in full["spouts"]:
        stream = joined_names(output_streams(rec, sp["spoutId"]))
        spouts.append({
            "id": sp["spoutId"],
            "emitted": [{"stream_id": stream, "value": sp["emitted"]}],
            "transferred": [{"stream_id": stream, "value": sp["transferred"]}],
            "acked": [{"stream_id": stream, "value": sp["acked"]}],
            "failed": [{"stream_id": stream, "value": sp["failed"]}],
            "complete_ms_avg": [{"stream_id": stream, "value": sp["completeLatency"]}]})
    bolts = []
    for b in full["bolts"]:
        spec_b = next(x for x in rec.spec.bolts if x.name == b["boltId"])
        out = joined_names(output_streams(rec, b["boltId"]))
        src = {"component_id": joined_names([i.component for i in spec_b.inputs]),
               "stream_id": joined_names(sorted({i.stream for i in spec_b.inputs}))}
        bolts.append({
            "id": b["boltId"],
            "emitted": [{"stream_id": out, "value": b["emitted"]}],
            "transferred": [{"stream_id": out, "value": b["transferred"]}],
            "acked": [{**src, "value": b["acked"]}],
            "failed": [{**src, "value": b["failed"]}],
            "process_ms_avg": [{**src, "value": b["processLatency"]}],
            "executed": [{**src, "value": b["executed"]}],
            "executed_ms_avg": [{**src, "value": b["executeLatency"]}]})
    return {"window": window, "window-hint": window_pretty(window), "spouts": spouts,
            "bolts": bolts}
