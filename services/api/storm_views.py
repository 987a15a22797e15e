"""Storm UI's response bodies (``/api/v1``), field for field with Storm's types, from the
topology records, the workers, the summed statistics and their rolling windows.

Storm's windows are ``600``, ``10800``, ``86400`` seconds and ``:all-time``. Here
``:all-time`` is what the processes counted in their lifetime (the sum of their counters,
as before), and the others come from :mod:`squall.core.control.rolling`, kept by the API replica
from its scrapes: a replica up for 5 minutes shows 5 minutes in every window. Gauges
(pending, lag) are the current value in every window. Prometheus stays the long-term store.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from services.api.stats import ComponentStats, ReportedError, is_counter
from services.api.views import Health, placements_of, pretty_uptime, uptime_s
from squall.core.control.assignment import ACKER
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.rolling import ALL_TIME, ALL_TIME_PRETTY, WINDOWS, Window
from squall.core.topology.model import SpoutSpec

#: Storm's window names, in Storm's order.
WINDOW_NAMES = (*WINDOWS, ALL_TIME)


def window_pretty(window: str) -> str:
    return WINDOWS.get(window, ALL_TIME_PRETTY)


@dataclass(frozen=True)
class Numbers:
    """What a topology's Storm routes are computed from."""

    #: per component, the processes' lifetime sums (``:all-time``)
    stats: dict[str, ComponentStats] = field(default_factory=dict)
    #: per window name, the increase per (component, statistic)
    windows: dict[str, Window[tuple[str, str]]] = field(default_factory=dict)
    #: per metrics endpoint (a process), its own lifetime sums per component
    by_endpoint: dict[str, dict[str, ComponentStats]] = field(default_factory=dict)
    #: the processes' last errors, oldest first
    errors: list[ReportedError] = field(default_factory=list)
    #: per window name, each process's emitted count by (url, component)
    endpoint_windows: dict[str, Window[tuple[str, str]]] = field(default_factory=dict)

    def errors_of(self, component: str) -> list[ReportedError]:
        return [e for e in self.errors if e.report.component == component]

    def in_window(self, window: str) -> tuple[dict[str, ComponentStats], float | None]:
        """The statistics per component over ``window``, and the seconds it spans (None:
        the processes' lifetime)."""
        if window == ALL_TIME:
            return self.stats, None
        w = self.windows.get(window, Window[tuple[str, str]]({}, 0.0))
        out: dict[str, ComponentStats] = {}
        for comp, now in self.stats.items():  # gauges: their current value, in any window
            out[comp] = st = ComponentStats()
            st.counters.update({k: v for k, v in now.counters.items() if not is_counter(k)})
        for (comp, stat), v in w.totals.items():
            st = out.setdefault(comp, ComponentStats())
            if stat == "latency_sum":
                st.latency_sum = v
            elif stat == "latency_count":
                st.latency_count = v
            else:
                st.counters[stat] = v
        return out, w.span_s


def _c(s: ComponentStats | None, key: str) -> float:
    return float(s.counters.get(key, 0.0)) if s else 0.0


def _n(s: ComponentStats | None, key: str) -> int:
    """A count, as Storm returns it: an integer (a typed client's int64 decodes it)."""
    return round(_c(s, key))


def _ms(s: ComponentStats | None) -> str:
    v = s.latency_ms() if s else None
    return f"{v:.3f}" if v is not None else "0.000"


def _batch_ms(s: ComponentStats | None) -> str:
    n = _c(s, "batches_timed")
    return f"{1000 * _c(s, 'batch_seconds') / n:.3f}" if n else "0.000"


def _execute_ms(s: ComponentStats | None) -> str:
    """Storm's execute latency: time in the bolt per tuple executed."""
    n = _c(s, "executed")
    return f"{1000 * _c(s, 'execute_seconds') / n:.3f}" if n else "0.000"


def _capacity(s: ComponentStats | None, span_s: float, tasks: int) -> str:
    """Storm's capacity: the share of each executor's time spent executing."""
    up = span_s * tasks
    return f"{min(1.0, _c(s, 'execute_seconds') / up):.3f}" if up > 0 else "0.000"


#: Storm's error fields, for a component that reported none (Storm's own nulls).
NO_ERROR: dict[str, Any] = {"lastError": "", "errorHost": "", "errorPort": None,
                            "errorWorkerLogLink": "", "errorTime": None,
                            "errorLapsedSecs": None}


def last_error(errors: list[ReportedError], now_ms: int) -> dict[str, Any]:
    """Storm's ``lastError`` fields of a component (``errorTime`` in seconds)."""
    if not errors:
        return NO_ERROR
    e = errors[-1]
    return {"lastError": e.report.error, "errorHost": e.host, "errorPort": e.port,
            "errorWorkerLogLink": _log_link(e), "errorTime": e.report.time_ms // 1000,
            "errorLapsedSecs": max(0, (now_ms - e.report.time_ms) // 1000)}


def component_errors(errors: list[ReportedError], now_ms: int) -> list[dict[str, Any]]:
    """Storm's ``componentErrors``, newest first (``errorTime`` in milliseconds)."""
    return [{"errorTime": e.report.time_ms, "errorHost": e.host, "errorPort": e.port,
             "error": e.report.error, "errorWorkerLogLink": _log_link(e),
             "errorLapsedSecs": max(0, (now_ms - e.report.time_ms) // 1000)}
            for e in reversed(errors)]


def _log_link(e: ReportedError) -> str:
    """Storm links the worker's log; here the process's errors as JSON."""
    return e.url.removesuffix("/metrics") + "/errors"


def spout_numbers(st: ComponentStats | None) -> dict[str, Any]:
    return {"emitted": _n(st, "emitted"), "transferred": _n(st, "emitted"),
            "acked": _n(st, "acked"), "failed": _n(st, "failed"), "completeLatency": _ms(st)}


def bolt_numbers(st: ComponentStats | None, span_s: float, tasks: int) -> dict[str, Any]:
    return {"emitted": _n(st, "emitted"), "transferred": _n(st, "emitted"),
            "executed": _n(st, "executed"), "acked": _n(st, "acked"),
            "failed": _n(st, "failed"), "executeLatency": _execute_ms(st),
            "processLatency": _batch_ms(st), "capacity": _capacity(st, span_s, tasks)}


def topology_stats(rec: TopologyRecord, numbers: Numbers) -> list[dict[str, Any]]:
    """``topologyStats``: the spouts' sums in every window."""
    out = []
    for window in WINDOW_NAMES:
        stats, _ = numbers.in_window(window)
        total = ComponentStats()
        for sp in rec.spec.spouts:
            st = stats.get(sp.name)
            if st is None:
                continue
            for k in ("emitted", "acked", "failed"):
                total.counters[k] += st.counters.get(k, 0.0)
            total.latency_sum += st.latency_sum
            total.latency_count += st.latency_count
        out.append({"windowPretty": window_pretty(window), "window": window,
                    **spout_numbers(total)})
    return out


def storm_workers(rec: TopologyRecord, workers: list[WorkerInfo],
                  assignments: dict[str, WorkerAssignment], now_ms: int) -> list[dict[str, Any]]:
    """``workers[]``: Storm's worker is a process; here, each process a worker runs for the
    topology (a spout or acker task group, or a bolts job), at its metrics endpoint."""
    tasks: dict[tuple[str, str], int] = {}
    for p in placements_of(rec.id, assignments):
        tasks[(p["worker"], p["component"])] = len(p["tasks"]) or 1
    out = []
    for w in sorted(workers, key=lambda w: w.worker.id):
        procs: dict[str, dict[str, Any]] = {}
        for e in w.endpoints:
            if e.get("topology") != rec.id:
                continue
            url = str(e.get("url", ""))
            comp = ACKER if e.get("kind") == "acker" else str(e.get("component", ""))
            proc = procs.setdefault(url, {"components": {}, "started": e.get("startedMs")})
            proc["components"][comp] = tasks.get((w.worker.id, comp), 1)
        for url, proc in sorted(procs.items()):
            started = int(proc["started"] or w.started_ms)
            up = max(0, (now_ms - started) // 1000)
            num = dict(sorted(proc["components"].items()))
            out.append({"supervisorId": w.worker.id, "host": w.host,
                        "port": urlsplit(url).port or 0, "topologyId": rec.id,
                        "topologyName": rec.display_name, "executorsTotal": sum(num.values()),
                        "componentNumTasks": num, "uptime": pretty_uptime(up),
                        "uptimeSeconds": up, "workerLogLink": url,
                        "assignedMemOnHeap": 0.0, "assignedMemOffHeap": 0.0,
                        "assignedCpu": 0.0})
    return out


def storm_topology(rec: TopologyRecord, now_ms: int, assignments: dict[str, WorkerAssignment],
                   numbers: Numbers, workers: list[WorkerInfo],
                   restarts: dict[str, Health] | None = None,
                   window: str = ALL_TIME) -> dict[str, Any]:
    """``GET /api/v1/topology/:id`` in Storm UI's shape, its components' numbers over
    ``window`` (``restarts``: see :func:`services.api.views.restarts_of`)."""
    spec = rec.spec
    rs = restarts or {}
    stats, span = numbers.in_window(window)
    up = uptime_s(rec, now_ms)
    span_s = up if span is None else min(span, up)

    def health(comp: str) -> dict[str, Any]:
        return rs.get(comp, Health()).fields()

    placed = placements_of(rec.id, assignments)
    spouts = []
    for sp in spec.spouts:
        st = stats.get(sp.name)
        spouts.append({"spoutId": sp.name, "encodedSpoutId": quote(sp.name, safe=""),
                       "tasks": sp.parallelism, "executors": sp.parallelism,
                       **spout_numbers(st),
                       **last_error(numbers.errors_of(sp.name), now_ms),
                       "replayed": _n(st, "replayed"), "deadLettered": _n(st, "dead_lettered"),
                       "pending": _n(st, "pending"), "lag": _n(st, "lag"), **health(sp.name)})
    bolts = []
    for b in spec.bolts:
        st = stats.get(b.name)
        bolts.append({"boltId": b.name, "encodedBoltId": quote(b.name, safe=""),
                      "tasks": b.parallelism, "executors": b.num_executors,
                      **bolt_numbers(st, span_s, b.parallelism),
                      **last_error(numbers.errors_of(b.name), now_ms),
                      "errors": _n(st, "errors"), "running": _c(st, "active") > 0,
                      "microBatches": _n(st, "batches"), "inputRows": _n(st, "rows"),
                      **health(b.name)})
    ack = stats.get(ACKER)
    storm_workers_ = storm_workers(rec, workers, assignments, now_ms)
    return {
        "id": rec.id, "encodedId": quote(rec.id, safe=""), "name": rec.display_name,
        "status": str(rec.lifecycle.status), "uptime": pretty_uptime(up),
        # Storm's is whole seconds; the exact one is in the configuration.
        "uptimeSeconds": int(up), "msgTimeout": math.ceil(spec.message_timeout_s),
        "tasksTotal": spec.num_tasks, "workersTotal": len(storm_workers_),
        "executorsTotal": spec.num_executors, "window": window,
        "windowHint": window_pretty(window),
        "schedulerDisplayResource": False, "replicationCount": 1, "debug": False,
        "samplingPct": 0.0, "topologyStats": topology_stats(rec, numbers),
        "workers": storm_workers_, "spouts": spouts, "bolts": bolts,
        "acker": {"componentId": ACKER, "tasks": spec.ackers,
                  "records": _n(ack, "records"), "pendingTrees": _n(ack, "pending"),
                  "treesAcked": _n(ack, "trees_acked"), "treesFailed": _n(ack, "trees_failed"),
                  "treesTimedOut": _n(ack, "trees_timed_out"), **health(ACKER),
                  **last_error(numbers.errors_of(ACKER), now_ms)},
        "assignment": placed,
        "edges": [{"from": i.component, "to": b.name, "stream": i.stream,
                   "grouping": str(i.grouping), "fields": list(i.fields)}
                  for b in spec.bolts for i in b.inputs],
        "configuration": {"storm.id": rec.id,
                          "topology.name": rec.display_name,
                          "topology.message.timeout.secs": spec.message_timeout_s,
                          "topology.bolt.deadline.secs": spec.deadline_s,
                          "topology.max.spout.pending": spec.max_spout_pending,
                          "topology.acker.executors": spec.ackers,
                          "topology.guarantee": spec.guarantee},
    }


def acker_bolt(acker: dict[str, Any]) -> dict[str, Any]:
    """The ackers as Storm lists its ``__acker`` system bolt (``?sys=1``)."""
    done = acker["treesAcked"] + acker["treesFailed"] + acker["treesTimedOut"]
    return {"boltId": ACKER, "encodedBoltId": ACKER, "tasks": acker["tasks"],
            "executors": acker["tasks"], "emitted": done, "transferred": done,
            "executed": acker["records"], "acked": acker["treesAcked"],
            "failed": acker["treesFailed"] + acker["treesTimedOut"],
            "executeLatency": "0.000", "processLatency": "0.000", "capacity": "0.000",
            "errors": 0, **{k: acker.get(k, v) for k, v in NO_ERROR.items()},
            "restarts": acker.get("restarts", 0),
            "crashLooping": acker.get("crashLooping", False),
            "lastExit": acker.get("lastExit", "")}


def output_streams(rec: TopologyRecord, component: str) -> list[str]:
    """The streams a spout or bolt declares, sorted."""
    c = rec.spec.component(component)
    return sorted(c.outputs() if isinstance(c, SpoutSpec) else c.outputs)


def joined_names(names: list[str]) -> str:
    """Counts are kept per component, not per stream: a component with several streams
    (or inputs) reports them together, under their names joined (see docs/decisions.md)."""
    return ",".join(names) if names else "default"
