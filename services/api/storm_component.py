"""Storm UI's ``/api/v1/topology/:id/component/:component``: one component's numbers in
every window, its inputs and outputs, its processes (Storm's executors) and its errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from services.api.storm_views import (
    WINDOW_NAMES,
    Numbers,
    acker_bolt,
    bolt_numbers,
    component_errors,
    joined_names,
    output_streams,
    spout_numbers,
    storm_topology,
    window_pretty,
)
from services.api.views import Health, placements_of, pretty_uptime, uptime_s
from squall.core.control.assignment import ACKER
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.rolling import ALL_TIME
from squall.core.errors import NotFoundError, TopologyError
from squall.core.topology.model import SpoutSpec


def _range(tasks: list[int]) -> str:
    """Storm's executor id: its first and last task, ``[3-4]``."""
    return f"[{min(tasks)}-{max(tasks)}]" if tasks else "[0-0]"


def storm_component(rec: TopologyRecord, component: str, now_ms: int,
                    assignments: dict[str, WorkerAssignment], numbers: Numbers,
                    workers: list[WorkerInfo], restarts: dict[str, Health] | None = None,
                    window: str = ALL_TIME) -> dict[str, Any]:
    """``GET /api/v1/topology/:id/component/:component`` in Storm UI's shape."""
    full = storm_topology(rec, now_ms, assignments, numbers, workers, restarts, window)
    if component == ACKER:
        kind, body, spec_c = "bolt", acker_bolt(full["acker"]), None
    else:
        try:
            spec_c = rec.spec.component(component)
        except TopologyError:
            raise NotFoundError(f"no component {component!r} in topology {rec.id!r}") from None
        kind = "spout" if isinstance(spec_c, SpoutSpec) else "bolt"
        body = next(x for x in full["spouts" if kind == "spout" else "bolts"]
                    if x.get("spoutId", x.get("boltId")) == component)
    up = uptime_s(rec, now_ms)
    per_window = []
    for w in WINDOW_NAMES:
        stats, span = numbers.in_window(w)
        st = stats.get(component)
        nums = spout_numbers(st) if kind == "spout" else \
            bolt_numbers(st, up if span is None else min(span, up), int(body["tasks"]))
        per_window.append({"windowPretty": window_pretty(w), "window": w, **nums})
    streams = ["__ack_ack"] if spec_c is None else output_streams(rec, component)
    out_stats = [{"stream": joined_names(streams), "emitted": body["emitted"],
                  "transferred": body["transferred"]}]
    if kind == "spout":
        out_stats[0] |= {"completeLatency": body["completeLatency"], "acked": body["acked"],
                         "failed": body["failed"]}
    result = {
        "user": "", "id": component, "encodedId": quote(component, safe=""),
        "name": rec.display_name, "executors": body["executors"], "tasks": body["tasks"],
        "topologyId": rec.id, "encodedTopologyId": quote(rec.id, safe=""),
        "topologyStatus": full["status"], "window": window, "windowHint": window_pretty(window),
        "componentType": kind, "debug": False, "samplingPct": 0.0, "eventLogLink": "",
        "profilingAndDebuggingCapable": False, "profileActionEnabled": False,
        "profilerActive": [], "schedulerDisplayResource": False,
        "requestedMemOnHeap": 0.0, "requestedMemOffHeap": 0.0, "requestedCpu": 0.0,
        "componentErrors": component_errors(numbers.errors_of(component), now_ms),
        "outputStats": out_stats,
        "executorStats": _executors(rec, component, kind, assignments, numbers, workers, now_ms),
        **{k: v for k, v in body.items() if k not in ("tasks", "executors")},
    }
    if kind == "spout":
        result["spoutSummary"] = per_window
    else:
        result["boltStats"] = per_window
        inputs = [] if spec_c is None or isinstance(spec_c, SpoutSpec) else list(spec_c.inputs)
        result["inputStats"] = [{
            "component": joined_names([i.component for i in inputs]),
            "encodedComponentId": quote(joined_names([i.component for i in inputs]), safe=""),
            "stream": joined_names(sorted({i.stream for i in inputs})),
            "executeLatency": body["executeLatency"], "processLatency": body["processLatency"],
            "executed": body["executed"], "acked": body["acked"], "failed": body["failed"]}]
    return result


def _executors(rec: TopologyRecord, component: str, kind: str,
               assignments: dict[str, WorkerAssignment], numbers: Numbers,
               workers: list[WorkerInfo], now_ms: int) -> list[dict[str, Any]]:
    """``executorStats``: Storm's executor is a thread; here, a process running some of the
    component's tasks, with its own numbers over its lifetime."""
    tasks = {p["worker"]: p["tasks"] for p in placements_of(rec.id, assignments)
             if p["component"] == component}
    out = []
    for w in sorted(workers, key=lambda w: w.worker.id):
        for e in w.endpoints:
            comp = ACKER if e.get("kind") == "acker" else str(e.get("component", ""))
            if e.get("topology") != rec.id or comp != component:
                continue
            url = str(e.get("url", ""))
            st = numbers.by_endpoint.get(url, {}).get(component)
            up = max(0, (now_ms - int(e.get("startedMs") or w.started_ms)) // 1000)
            mine = list(tasks.get(w.worker.id, []))
            nums = spout_numbers(st) if kind == "spout" else \
                bolt_numbers(st, float(up), max(1, len(mine)))
            out.append({"id": _range(mine), "host": w.host, "port": urlsplit(url).port or 0,
                        "uptime": pretty_uptime(up), "uptimeSeconds": up,
                        "workerLogLink": url, **nums})
    return out
