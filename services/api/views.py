"""Response bodies: our own topology view and Storm UI's shapes, from records and stats."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from services.api.control import Contender
from services.api.stats import ComponentStats, Sample
from squall.core.assignment import ACKER
from squall.core.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.errors import NotFoundError, TopologyError
from squall.core.topology import SpoutSpec

WINDOW = ":all-time"


def placements_of(tid: str, assignments: dict[str, WorkerAssignment]) -> list[dict[str, Any]]:
    return [{"worker": w, "component": p.component, "kind": str(p.kind), "tasks": list(p.tasks)}
            for w, a in sorted(assignments.items()) for p in a.placements if p.topology == tid]


def restarts_of(tid: str, workers: list[WorkerInfo]) -> dict[str, tuple[int, bool]]:
    """Per component: its processes' restarts and whether one is in a crash loop (the
    workers publish both with their endpoints; the acker as ``__acker``)."""
    out: dict[str, tuple[int, bool]] = {}
    for w in workers:
        for e in w.endpoints:
            if e.get("topology") != tid:
                continue
            comp = ACKER if e.get("kind") == "acker" else str(e.get("component", ""))
            n, looping = out.get(comp, (0, False))
            out[comp] = (n + int(e.get("restarts", 0) or 0), looping or bool(e.get("crashLooping")))
    return out


def uptime_s(rec: TopologyRecord, now_ms: int) -> float:
    return max(0.0, (now_ms - rec.submitted_ms) / 1000)


def pretty_uptime(seconds: float) -> str:
    """Storm's uptime string: ``1d 2h 3m 4s``, leading zero units left out."""
    s = max(int(seconds), 0)
    parts = [(s // 86400, "d"), (s // 3600 % 24, "h"), (s // 60 % 60, "m"), (s % 60, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{n}{u}" for n, u in parts)


def nimbus_summary(contenders: list[Contender], this_url: str, this_started_ms: int,
                   now_ms: int) -> dict[str, Any]:
    """Storm's ``nimbus/summary``: the API replicas (Squall's nimbuses), the leader first.
    A replica's uptime is what it published when it joined the election."""
    out = []
    for i, c in enumerate(contenders):
        started = this_started_ms if c.url == this_url else c.started_ms
        up = 0 if started is None else max(0, (now_ms - started) // 1000)
        url = urlsplit(c.url)
        out.append({"host": url.hostname or c.url, "port": url.port or 0,
                    "status": "Leader" if i == 0 else "Not a Leader",
                    "version": c.version or "unknown", "nimbusUpTime": pretty_uptime(up),
                    "nimbusUpTimeSeconds": str(up), "nimbusLogLink": f"{c.url}/metrics"})
    return {"nimbuses": out}


def topology_view(rec: TopologyRecord, now_ms: int, assignments: dict[str, WorkerAssignment],
                  stats: dict[str, ComponentStats] | None = None) -> dict[str, Any]:
    """Our own route's view: the record, where its tasks run, and its numbers."""
    lc = rec.lifecycle
    return {
        "id": rec.id, "name": rec.spec.name, "status": str(lc.status), "version": rec.version,
        "submitted_ms": rec.submitted_ms, "uptime_s": uptime_s(rec, now_ms),
        "deadline_ms": lc.deadline_ms, "pending_parallelism": lc.parallelism,
        "spec": rec.spec.to_dict(), "assignment": placements_of(rec.id, assignments),
        "stats": {c: _numbers(s) for c, s in sorted((stats or {}).items())},
    }


def _numbers(s: ComponentStats) -> dict[str, Any]:
    out: dict[str, Any] = dict(sorted(s.counters.items()))
    if s.latency_count:
        out["complete_latency_ms"] = s.latency_ms()
        p50, p99 = s.quantile(0.5), s.quantile(0.99)
        out["complete_latency_p50_s"] = p50
        out["complete_latency_p99_s"] = p99
    return out


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


def _capacity(s: ComponentStats | None, now_ms: int, rec: TopologyRecord, tasks: int) -> str:
    """Storm's capacity: the share of each executor's time spent executing."""
    up = uptime_s(rec, now_ms) * tasks
    return f"{min(1.0, _c(s, 'execute_seconds') / up):.3f}" if up > 0 else "0.000"


def storm_topology(rec: TopologyRecord, now_ms: int, assignments: dict[str, WorkerAssignment],
                   stats: dict[str, ComponentStats],
                   restarts: dict[str, tuple[int, bool]] | None = None) -> dict[str, Any]:
    """``GET /api/v1/topology/:id`` in Storm UI's shape (``restarts``: see restarts_of)."""
    spec = rec.spec
    rs = restarts or {}

    def health(comp: str) -> dict[str, Any]:
        n, looping = rs.get(comp, (0, False))
        return {"restarts": n, "crashLooping": looping}

    placed = placements_of(rec.id, assignments)
    spouts, all_emitted, all_acked, all_failed, lat_sum, lat_n = [], 0, 0, 0, 0.0, 0.0
    for sp in spec.spouts:
        st = stats.get(sp.name)
        spouts.append({"spoutId": sp.name, "tasks": sp.parallelism, "executors": sp.parallelism,
                       "emitted": _n(st, "emitted"), "transferred": _n(st, "emitted"),
                       "acked": _n(st, "acked"), "failed": _n(st, "failed"),
                       "replayed": _n(st, "replayed"), "deadLettered": _n(st, "dead_lettered"),
                       "pending": _n(st, "pending"), "lag": _n(st, "lag"),
                       "completeLatency": _ms(st), "lastError": "", **health(sp.name)})
        all_emitted += _n(st, "emitted")
        all_acked += _n(st, "acked")
        all_failed += _n(st, "failed")
        if st:
            lat_sum += st.latency_sum
            lat_n += st.latency_count
    bolts = []
    for b in spec.bolts:
        st = stats.get(b.name)
        bolts.append({"boltId": b.name, "tasks": b.parallelism, "executors": b.parallelism,
                      "emitted": _n(st, "emitted"), "transferred": _n(st, "emitted"),
                      "executed": _n(st, "executed"), "acked": _n(st, "acked"),
                      "failed": _n(st, "failed"), "executeLatency": _execute_ms(st),
                      "processLatency": _batch_ms(st),
                      "capacity": _capacity(st, now_ms, rec, b.parallelism),
                      "errors": _n(st, "errors"),
                      "running": _c(st, "active") > 0, "microBatches": _n(st, "batches"),
                      "inputRows": _n(st, "rows"), "lastError": "", **health(b.name)})
    ack = stats.get(ACKER)
    return {
        "id": rec.id, "name": spec.name, "status": str(rec.lifecycle.status),
        "uptimeSeconds": int(uptime_s(rec, now_ms)), "msgTimeout": spec.message_timeout_s,
        "tasksTotal": spec.num_tasks,
        "workersTotal": len({p["worker"] for p in placed}),
        "executorsTotal": spec.num_tasks,
        "window": WINDOW, "windowHint": "the processes' lifetime",
        "topologyStats": [{"window": WINDOW, "windowPretty": "All time", "emitted": all_emitted,
                           "transferred": all_emitted, "acked": all_acked, "failed": all_failed,
                           "completeLatency": f"{1000 * lat_sum / lat_n:.3f}" if lat_n
                           else "0.000"}],
        "spouts": spouts, "bolts": bolts,
        "acker": {"componentId": ACKER, "tasks": spec.ackers,
                  "records": _n(ack, "records"), "pendingTrees": _n(ack, "pending"),
                  "treesAcked": _n(ack, "trees_acked"), "treesFailed": _n(ack, "trees_failed"),
                  "treesTimedOut": _n(ack, "trees_timed_out"), **health(ACKER)},
        "assignment": placed,
        "edges": [{"from": i.component, "to": b.name, "stream": i.stream,
                   "grouping": str(i.grouping), "fields": list(i.fields)}
                  for b in spec.bolts for i in b.inputs],
        "configuration": {"topology.message.timeout.secs": spec.message_timeout_s,
                          "topology.max.spout.pending": spec.max_spout_pending,
                          "topology.acker.executors": spec.ackers,
                          "topology.guarantee": spec.guarantee},
    }


def storm_component(rec: TopologyRecord, component: str, now_ms: int,
                    assignments: dict[str, WorkerAssignment],
                    stats: dict[str, ComponentStats],
                    restarts: dict[str, tuple[int, bool]] | None = None) -> dict[str, Any]:
    full = storm_topology(rec, now_ms, assignments, stats, restarts)
    if component == ACKER:
        body = full["acker"]
        kind = "acker"
    else:
        try:
            c = rec.spec.component(component)
        except TopologyError:
            raise NotFoundError(f"no component {component!r} in topology {rec.id!r}") from None
        kind = "spout" if isinstance(c, SpoutSpec) else "bolt"
        body = next(x for x in full["spouts" if kind == "spout" else "bolts"]
                    if x.get("spoutId", x.get("boltId")) == component)
    return {"id": component, "name": component, "componentType": kind, "topologyId": rec.id,
            "topologyStatus": full["status"], "window": WINDOW, **body,
            "executorStats": [p for p in full["assignment"] if p["component"] == component]}


def storm_lag(rec: TopologyRecord, samples: list[Sample]) -> dict[str, Any]:
    """``GET /api/v1/topology/:id/lag`` in Storm's shape: per spout, per topic and partition,
    the committed offset, the log's head and the lag between them."""
    parts: dict[tuple[str, str, str], dict[str, int]] = {}
    for name, labels, value in samples:
        field = {"squall_spout_committed_offset": "consumerCommittedOffset",
                 "squall_spout_lag": "lag"}.get(name)
        if field is None:
            continue
        key = (labels.get("component", ""), labels.get("topic", ""),
               labels.get("partition", ""))
        parts.setdefault(key, {})[field] = int(value)
    out: dict[str, Any] = {}
    for sp in rec.spec.spouts:
        result: dict[str, dict[str, dict[str, int]]] = {}
        for (comp, topic, part), v in sorted(parts.items()):
            if comp != sp.name or "consumerCommittedOffset" not in v:
                continue
            lag = v.get("lag", 0)
            result.setdefault(topic, {})[part] = {
                "consumerCommittedOffset": v["consumerCommittedOffset"],
                "logHeadOffset": v["consumerCommittedOffset"] + lag, "lag": lag}
        out[sp.name] = {"spoutId": sp.name, "spoutType": "KAFKA", "spoutLagResult": result}
    return out


def acker_bolt(acker: dict[str, Any]) -> dict[str, Any]:
    """The ackers as Storm lists its ``__acker`` system bolt (``?sys=1``)."""
    done = acker["treesAcked"] + acker["treesFailed"] + acker["treesTimedOut"]
    return {"boltId": ACKER, "tasks": acker["tasks"], "executors": acker["tasks"],
            "emitted": done, "transferred": done, "executed": acker["records"],
            "acked": acker["treesAcked"], "failed": acker["treesFailed"] + acker["treesTimedOut"],
            "executeLatency": "0.000", "processLatency": "0.000", "capacity": "0.000",
            "errors": 0, "lastError": "", "restarts": acker.get("restarts", 0),
            "crashLooping": acker.get("crashLooping", False)}
