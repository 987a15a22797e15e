"""Storm UI's ``/api/v1/topology/:id/visualization``: the topology's graph as Storm's UI
draws it (Storm serves it without documenting it; the shape is its ``UIHelpers``').

Per component: its type, capacity, latency and transferred count in the window asked
for, its processes (``:stats``, each with its transferred counts per window and stream),
a link to its page, and its inputs with their streams and groupings.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

from services.api.storm_views import Numbers, output_streams, storm_topology
from squall.core.control.assignment import ACKER
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.rolling import ALL_TIME


def sanitized_stream(stream: str) -> str:
    """Storm's ``:sani-stream``: a name safe as an HTML id, made unique by the stream name's
    Java ``hashCode`` (Storm's UI keys its stream checkboxes by it)."""
    h = 0
    for ch in stream:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return "s" + re.sub(r"[^A-Za-z0-9_]", "_", stream) + str(signed)


def visualization(rec: TopologyRecord, now_ms: int, assignments: dict[str, WorkerAssignment],
                  numbers: Numbers, workers: list[WorkerInfo], window: str = ALL_TIME,
                  sys: bool = False) -> dict[str, Any]:
    full = storm_topology(rec, now_ms, assignments, numbers, workers, None, window)
    spec = rec.spec
    out: dict[str, Any] = {}
    rows = [("spout", s) for s in full["spouts"]] + [("bolt", b) for b in full["bolts"]]
    for kind, row in rows:
        name = row.get("spoutId", row.get("boltId"))
        streams = output_streams(rec, name)
        inputs = [] if kind == "spout" else [
            {":component": i.component, ":stream": i.stream,
             ":sani-stream": sanitized_stream(i.stream), ":grouping": str(i.grouping)}
            for b in spec.bolts if b.name == name for i in b.inputs]
        out[name] = {
            ":type": kind, ":capacity": float(row.get("capacity", 0.0)),
            ":latency": float(row["completeLatency"] if kind == "spout"
                              else row["processLatency"]),
            ":transferred": row["transferred"],
            ":stats": _processes(rec, name, workers, numbers, streams, now_ms),
            ":link": f"/api/v1/topology/{quote(rec.id, safe='')}/component/"
                     f"{quote(name, safe='')}",
            ":inputs": inputs}
    if sys:
        out[ACKER] = {":type": "bolt", ":capacity": 0.0, ":latency": 0.0,
                      ":transferred": full["acker"]["treesAcked"], ":stats": [],
                      ":link": f"/api/v1/topology/{quote(rec.id, safe='')}/component/{ACKER}",
                      ":inputs": []}
    return out


def _processes(rec: TopologyRecord, component: str, workers: list[WorkerInfo],
               numbers: Numbers, streams: list[str], now_ms: int) -> list[dict[str, Any]]:
    """The component's processes, each with what it emitted per window. Counts are per
    component, not per stream: a component's are all on its first stream."""
    sani = sanitized_stream(streams[0] if streams else "default")
    out = []
    for w in workers:
        for e in w.endpoints:
            if e.get("topology") != rec.id or e.get("component") != component:
                continue
            url = str(e.get("url", ""))
            up = max(0, (now_ms - int(e.get("startedMs") or w.started_ms)) // 1000)
            own = numbers.by_endpoint.get(url, {}).get(component)
            transferred = {win: {sani: round(numbers.endpoint_windows[win].get(
                (url, component)))} for win in numbers.endpoint_windows}
            transferred[ALL_TIME] = {sani: round(own.counters.get("emitted", 0.0))
                                     if own else 0}
            out.append({":host": w.host, ":port": urlsplit(url).port or 0,
                        ":uptime_secs": up, ":transferred": transferred})
    return out
