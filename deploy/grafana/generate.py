"""Writes the Grafana dashboards (JSON) from one description, so panels stay consistent.

Run ``python deploy/grafana/generate.py`` after a change; a test checks that the
committed JSON is what this script writes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DS = {"type": "prometheus", "uid": "squall-prometheus"}
HERE = Path(__file__).parent / "dashboards"
T = 'topology="$topology"'
TC = 'topology="$topology", component="$component"'


def panel(pid: int, title: str, targets: list[tuple[str, str]], x: int, y: int, w: int = 12,
          h: int = 8, unit: str = "short", kind: str = "timeseries",
          description: str = "") -> dict[str, Any]:
    return {
        "id": pid, "type": kind, "title": title, "description": description, "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}} if kind ==
        "timeseries" else {"reduceOptions": {"calcs": ["lastNotNull"]}},
        "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": expr, "legendFormat": leg}
                    for i, (expr, leg) in enumerate(targets)],
    }


def variable(name: str, query: str) -> dict[str, Any]:
    return {"name": name, "type": "query", "datasource": DS, "refresh": 2, "sort": 1,
            "query": {"query": query, "refId": name}, "definition": query}


def dashboard(uid: str, title: str, panels: list[dict[str, Any]],
              variables: list[dict[str, Any]]) -> dict[str, Any]:
    return {"uid": uid, "title": title, "tags": ["squall"], "schemaVersion": 39,
            "version": 1, "editable": True, "refresh": "5s", "timezone": "browser",
            "time": {"from": "now-30m", "to": "now"}, "templating": {"list": variables},
            "panels": panels}


def q(metric: str, by: str = "", sel: str = T, rng: str = "1m") -> str:
    inner = f"rate({metric}{{{sel}}}[{rng}])"
    return f"sum by ({by}) ({inner})" if by else f"sum({inner})"


def overview() -> dict[str, Any]:
    lat = "squall_spout_complete_latency_seconds_bucket"
    p = [
        panel(1, "Source messages acked / failed per second", [
            (q("squall_spout_acked_total"), "acked"),
            (q("squall_spout_failed_total", "reason"), "failed: {{reason}}")], 0, 0,
            unit="ops", description="Trees completed (offset committable) and failed, by reason"),
        panel(2, "__acker throughput (records per second)", [
            (q("squall_acker_records_total", "kind"), "{{kind}}"),
            (q("squall_acker_trees_total", "outcome"), "trees {{outcome}}")], 12, 0,
            unit="ops", description="Init / ack / fail records the ackers applied"),
        panel(3, "Complete latency p50 / p99", [
            (f"histogram_quantile(0.5, sum by (le) (rate({lat}{{{T}}}[1m])))", "p50"),
            (f"histogram_quantile(0.99, sum by (le) (rate({lat}{{{T}}}[1m])))", "p99")],
            0, 8, unit="s", description="From spout emit to the tree's completion"),
        panel(4, "Pending trees", [
            (f"sum(squall_acker_pending_trees{{{T}}})", "in the ackers"),
            (f"sum(squall_spout_pending{{{T}}})", "in the spouts")], 12, 8),
        panel(5, "Lag per partition (messages, and seconds on the right)", [
            (f"max by (topic, partition) (squall_source_lag_messages{{{T}}})",
             "{{topic}}[{{partition}}]"),
            (f"max by (topic, partition) (squall_source_lag_seconds{{{T}}})",
             "{{topic}}[{{partition}}] seconds")], 0, 16,
            description="The log's end minus the spout's committed offset, read from Kafka by "
            "the API (shown while the spout is down too); seconds: the age of the oldest "
            "message not yet committed"),
        panel(6, "Replays and dead letters per second", [
            (q("squall_spout_replayed_total"), "replayed"),
            (q("squall_spout_dead_lettered_total"), "dead-lettered"),
            (q("squall_spout_bad_records_total"), "undecodable")], 12, 16, unit="ops"),
        panel(7, "Emitted per second", [
            (q("squall_spout_emitted_total", "component"), "spout {{component}}"),
            (q("squall_bolt_emitted_total", "component"), "bolt {{component}}")], 0, 24,
            unit="ops"),
        panel(8, "Acker memory", [
            (f"sum(squall_acker_pending_bytes{{{T}}})", "ledger bytes")], 12, 24,
            unit="bytes"),
    ]
    return dashboard("squall-topology", "Squall / Topology overview", p, [
        variable("topology", "label_values(squall_spout_emitted_total, topology)")])


def component() -> dict[str, Any]:
    dur = "squall_bolt_batch_duration_seconds_bucket"
    p = [
        panel(1, "Executed / emitted / acked / failed per second", [
            (q("squall_bolt_executed_total", sel=TC), "executed"),
            (q("squall_bolt_emitted_total", sel=TC), "emitted"),
            (q("squall_bolt_acked_total", sel=TC), "acked"),
            (q("squall_bolt_failed_total", sel=TC), "failed")], 0, 0, unit="ops"),
        panel(2, "Execute latency (per tuple)", [
            (f"{q('squall_bolt_execute_seconds_total', sel=TC)} / "
             f"{q('squall_bolt_executed_total', sel=TC)}", "execute")], 12, 0, unit="s"),
        panel(3, "Micro-batch duration p50 / p99", [
            (f"histogram_quantile(0.5, sum by (le) (rate({dur}{{{TC}}}[1m])))", "p50"),
            (f"histogram_quantile(0.99, sum by (le) (rate({dur}{{{TC}}}[1m])))", "p99")],
            0, 8, unit="s"),
        panel(4, "Input rows per second (edge messages)", [
            (q("squall_bolt_input_rows_total", sel=TC), "rows")], 12, 8, unit="ops"),
        panel(5, "Capacity (busy executor-seconds per second)", [
            (q("squall_bolt_execute_seconds_total", sel=TC), "busy")], 0, 16,
            description="Above the parallelism: the bolt is the bottleneck"),
        panel(6, "Errors per second", [
            (q("squall_bolt_errors_total", sel=TC), "errors"),
            (q("squall_bolt_bad_records_total", sel=TC), "undecodable"),
            (q("squall_bolt_culprits_total", sel=TC), "killed or hung the bolt")], 12, 16,
            unit="ops", description="Records the bolt raised on, could not decode, or that "
            "killed or hung its process (found in sandboxes: docs/poison.md)"),
        panel(7, "Query running", [(f"max(squall_bolt_query_active{{{TC}}})", "running")],
              0, 24, w=6, h=4, kind="stat"),
        panel(8, "Micro-batches", [(f"sum(squall_bolt_batches_total{{{TC}}})", "batches")],
              6, 24, w=6, h=4, kind="stat"),
        panel(10, "Micro-batch running (seconds)", [
            (f"max(squall_bolt_batch_running_seconds{{{TC}}})", "running")],
              12, 24, w=6, h=4, kind="stat",
              description="How long the current micro-batch has run; the job stops past ten "
              "bolt deadlines"),
        panel(11, "Sandboxes", [(f"sum(squall_bolt_sandboxes_total{{{TC}}})", "sandboxes")],
              18, 24, w=6, h=4, kind="stat",
              description="Processes of their own run to find records that kill or hang the "
              "bolt"),
        panel(9, "Where the micro-batches' time goes (seconds per second)", [
            (q("squall_bolt_task_phase_seconds_total", "phase", TC), "task: {{phase}}"),
            (q("squall_bolt_batch_phase_seconds_total", "phase", TC), "spark: {{phase}}")],
            0, 28, w=24, unit="s",
            description="The bolt tasks' time (input: waiting for the rows; execute: decoding "
            "and the bolt; produce; flush: Kafka's confirmation) and Spark's phases"),
    ]
    return dashboard("squall-component", "Squall / Component", p, [
        variable("topology", "label_values(squall_bolt_executed_total, topology)"),
        variable("component",
                 'label_values(squall_bolt_executed_total{topology="$topology"}, component)')])


def processes() -> dict[str, Any]:
    """Every Squall process: the services' own (Prometheus' process collector), and the
    bolts jobs' Spark JVM and Python workers (squall_bolt_process_*, jvm_*)."""
    sq = 'job=~"squall.*"'
    who = "{{job}} {{process}} {{instance}}"
    spark = "bolts {{topology}} {{role}} {{pid}}"
    p = [
        panel(1, "CPU per process (cores)", [
            (f"rate(process_cpu_seconds_total{{{sq}}}[1m])", who),
            ("rate(squall_bolt_process_cpu_seconds_total[1m])", spark)], 0, 0, unit="short"),
        panel(2, "Resident memory per process", [
            (f"process_resident_memory_bytes{{{sq}}}", who),
            ("squall_bolt_process_resident_memory_bytes", spark)], 12, 0, unit="bytes"),
        panel(3, "Open files per process", [
            (f"process_open_fds{{{sq}}}", who),
            ("squall_bolt_process_open_fds", spark)], 0, 8),
        panel(4, "Spark processes of the bolts jobs", [
            ("sum by (topology, role) (squall_bolt_processes)", "{{topology}} {{role}}")],
            12, 8, description="The JVM and Spark's Python workers under each bolts job"),
        panel(5, "JVM heap (bolts jobs)", [
            ('jvm_memory_bytes_used{area="heap"}', "used {{instance}}"),
            ('jvm_memory_bytes_committed{area="heap"}', "committed {{instance}}"),
            ('jvm_memory_bytes_max{area="heap"}', "max {{instance}}")], 0, 16, unit="bytes"),
        panel(6, "JVM garbage collection (seconds per second)", [
            ("rate(jvm_gc_collection_seconds_sum[1m])", "{{gc}} {{instance}}")], 12, 16,
            unit="s"),
    ]
    return dashboard("squall-processes", "Squall / Processes", p, [])


DASHBOARDS = {"topology-overview.json": overview, "component.json": component,
              "processes.json": processes}


def render() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2) + "\n" for name, fn in DASHBOARDS.items()}


if __name__ == "__main__":
    for name, text in render().items():
        (HERE / name).write_text(text)
        print(f"wrote {HERE / name}")
