"""Response bodies of our own routes, and what Storm UI's (services/api/storm_views.py)
shares with them: placements, restarts, uptimes, the API replicas."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from services.api.control import Contender
from services.api.stats import ComponentStats
from squall.core.control.assignment import ACKER
from squall.core.control.cluster import TopologyRecord, WorkerAssignment, WorkerInfo
from squall.core.control.teardown import Teardown


def placements_of(tid: str, assignments: dict[str, WorkerAssignment]) -> list[dict[str, Any]]:
    return [{"worker": w, "component": p.component, "kind": str(p.kind), "tasks": list(p.tasks)}
            for w, a in sorted(assignments.items()) for p in a.placements if p.topology == tid]


@dataclass(frozen=True)
class Health:
    """A component's processes as their workers see them."""

    restarts: int = 0
    crash_looping: bool = False
    #: the error a process in a crash loop last exited with
    last_exit: str = ""

    def fields(self) -> dict[str, Any]:
        """As the topology's Storm UI view shows them."""
        return {"restarts": self.restarts, "crashLooping": self.crash_looping,
                "lastExit": self.last_exit}


def restarts_of(tid: str, workers: list[WorkerInfo]) -> dict[str, Health]:
    """Per component: its processes' restarts, whether one is in a crash loop and the error
    it last exited with (the workers publish them with their endpoints; the acker as
    ``__acker``)."""
    out: dict[str, Health] = {}
    for w in workers:
        for e in w.endpoints:
            if e.get("topology") != tid:
                continue
            comp = ACKER if e.get("kind") == "acker" else str(e.get("component", ""))
            h = out.get(comp, Health())
            looping = bool(e.get("crashLooping"))
            out[comp] = Health(h.restarts + int(e.get("restarts", 0) or 0),
                               h.crash_looping or looping,
                               str(e.get("lastExit") or "") if looping else h.last_exit)
    return out


def live_processes(rec: TopologyRecord, workers: list[WorkerInfo]) -> dict[str, int]:
    """Per component of ``rec`` (its spouts, bolts and ``__acker``): how many processes run
    it, neither stopping nor in a crash loop; 0 for a component no worker runs."""
    out = {c.name: 0 for c in rec.spec.components()} | {ACKER: 0}
    for w in workers:
        for url in {e["url"] for e in w.endpoints if e.get("topology") == rec.id
                    and not e.get("stopping") and not e.get("crashLooping")}:
            comps = {ACKER if e.get("kind") == "acker" else str(e.get("component", ""))
                     for e in w.endpoints if e["url"] == url}
            for comp in comps & out.keys():
                out[comp] += 1
    return out


def uptime_s(rec: TopologyRecord, now_ms: int) -> float:
    return max(0.0, (now_ms - rec.submitted_ms) / 1000)


def pretty_uptime(seconds: float) -> str:
    """Storm's uptime string: ``1d 2h 3m 4s``, leading zero units left out."""
    s = max(int(seconds), 0)
    d, h, m, sec = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if d:
        return f"{d}d {h}h {m}m {sec}s"
    if h:
        return f"{h}h {m}m {sec}s"
    return f"{m}m {sec}s" if m else f"{sec}s"


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
                  stats: dict[str, ComponentStats] | None = None,
                  links: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Our own route's view: the record, where its tasks run, its numbers, and where to
    look further (its bolts job's Spark UI, its Grafana dashboard)."""
    lc = rec.lifecycle
    return {
        "id": rec.id, "name": rec.display_name, "status": str(lc.status), "version": rec.version,
        "submitted_ms": rec.submitted_ms, "uptime_s": uptime_s(rec, now_ms),
        "deadline_ms": lc.deadline_ms, "pending_parallelism": lc.parallelism,
        # as submitted: the kept state is the submission's, not the spec's
        "spec": {**{k: v for k, v in rec.spec.to_dict().items() if k != "state_of"},
                 "name": rec.display_name},
        "state_of": rec.spec.state_of,
        "assignment": placements_of(rec.id, assignments),
        "stats": {c: _numbers(s) for c, s in sorted((stats or {}).items())},
        "links": links or {"spark_ui": None, "grafana": None},
    }


def _numbers(s: ComponentStats) -> dict[str, Any]:
    out: dict[str, Any] = dict(sorted(s.counters.items()))
    if s.latency_count:
        out["complete_latency_ms"] = s.latency_ms()
        p50, p99 = s.quantile(0.5), s.quantile(0.99)
        out["complete_latency_p50_s"] = p50
        out["complete_latency_p99_s"] = p99
    return out


def teardown_view(t: Teardown) -> dict[str, Any]:
    """A killed topology's teardown (squall/core/control/teardown.py), with a sentence of it."""
    return {**dataclasses.asdict(t), "spec": t.spec.to_dict() if t.spec is not None else None,
            "done": t.done_ms is not None, "summary": t.summary()}
