"""What the benchmarks measure besides time: the services' Prometheus series (scraped from
their /metrics) and the CPU and memory of process trees (from /proc)."""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from squall import process_tree


def histogram(port: int, name: str, **labels: str) -> list[tuple[float, float]]:
    """A histogram's cumulative buckets, summed over the series whose labels include
    ``labels``."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[float, float] = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name == f"{name}_bucket" and all(s.labels.get(k) == v
                                                  for k, v in labels.items()):
                le = float(s.labels["le"])
                out[le] = out.get(le, 0.0) + s.value
    return sorted(out.items())


def sample_sums(port: int, names: Mapping[str, str], **labels: str) -> dict[str, float]:
    """``names`` (a sample's name -> the key it is summed under) over every sample of the
    process at ``port`` whose labels include ``labels``."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = dict.fromkeys(names.values(), 0.0)
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            if s.name in names and all(s.labels.get(k) == v for k, v in labels.items()):
                out[names[s.name]] += s.value
    return out


def bolt_totals(port: int) -> dict[str, dict[str, float]]:
    """Per bolt component: micro-batches, their total seconds, rows, task seconds."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, dict[str, float]] = {}
    keys = {"squall_bolt_batch_duration_seconds_count": "batches",
            "squall_bolt_batch_duration_seconds_sum": "batch_s",
            "squall_bolt_input_rows_total": "rows", "squall_bolt_execute_seconds_total": "task_s",
            "squall_bolt_executed_total": "tuples"}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            key = keys.get(s.name)
            if s.name == "squall_bolt_batch_phase_seconds_total":
                key = f"phase_{s.labels['phase']}"
            if s.name == "squall_bolt_task_phase_seconds_total":
                key = f"in_task_{s.labels['phase']}"
            if key:
                d = out.setdefault(s.labels["component"], {})
                d[key] = d.get(key, 0.0) + s.value
    return out


def where_time_goes(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
                    ) -> dict[str, dict[str, float]]:
    prof = {}
    # A bolt fused into another's query (squall.core.topology.chains) has no micro-batches of
    # its own: its figures are per micro-batch of the query it runs in (the most batches seen).
    queries = max((a.get("batches", 0.0) - before.get(c, {}).get("batches", 0.0)
                   for c, a in after.items()), default=0.0)
    for comp, a in after.items():
        d = {k: v - before.get(comp, {}).get(k, 0.0) for k, v in a.items()}
        n = max(d.get("batches", 0.0) or queries, 1.0)
        prof[comp] = {"micro_batches": d.get("batches", 0.0),
                      "batch_ms": round(1000 * d.get("batch_s", 0.0) / n, 1),
                      "task_ms_per_batch": round(1000 * d.get("task_s", 0.0) / n, 1),
                      "tuples_per_batch": round(d.get("tuples", 0.0) / n, 1),
                      **{k.removeprefix("phase_") + "_ms": round(1000 * v / n, 1)
                         for k, v in d.items() if k.startswith("phase_")},
                      **{k + "_ms_per_batch": round(1000 * v / n, 1)
                         for k, v in d.items() if k.startswith("in_task_")}}
    return prof


def quantile(before: list[tuple[float, float]], after: list[tuple[float, float]],
             q: float) -> float:
    """Quantile of the observations between two scrapes of a cumulative histogram."""
    b = dict(before)
    cum = [(le, c - b.get(le, 0.0)) for le, c in after]
    total = cum[-1][1]
    if total <= 0:
        return float("nan")
    target, prev_le, prev_c = q * total, 0.0, 0.0
    for le, c in cum:
        if c >= target:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (target - prev_c) / max(c - prev_c, 1e-9)
        prev_le, prev_c = le, c
    return prev_le


def tree_pids(pid: int) -> list[int]:
    """A process and its descendants."""
    return [p.pid for p in process_tree.tree(pid)]


def cpu_by_kind(pid: int) -> dict[str, float]:
    """CPU seconds of the bolts job's process tree by kind: the driver (Python), the JVM,
    Spark's Python workers."""
    out: dict[str, float] = {}
    for p in process_tree.tree(pid):
        kind = "python_workers" if p.role == "python_worker" else p.role
        out[kind] = out.get(kind, 0.0) + p.cpu_s
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process tree (own and reaped children's)."""
    return process_tree.cpu_s(process_tree.tree(pid))


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process tree, in MiB."""
    return process_tree.rss_bytes(process_tree.tree(pid)) / 2**20
