"""Storm UI's REST contract, from the sample responses of Storm's ``docs/STORM-UI-REST-API.md``:
every field of a documented sample, with a value of the sample's type. The values are the
documentation's; only the types matter (a ``null`` in a sample takes a number, a string or
null, as Storm returns either). Free-form maps (``configuration``, ``componentNumTasks``)
are checked as maps.
"""

from __future__ import annotations

from typing import Any

NULLABLE = None
FREE_FORM = {"configuration", "componentNumTasks"}

CLUSTER_SUMMARY = {
    "stormVersion": "0.9.2-incubating-SNAPSHOT", "supervisors": 1, "slotsTotal": 4,
    "slotsUsed": 3, "slotsFree": 1, "executorsTotal": 28, "tasksTotal": 28,
    "schedulerDisplayResource": True, "totalMem": 4096.0, "totalCpu": 400.0,
    "availMem": 1024.0, "availCPU": 250.0, "memAssignedPercentUtil": 75.0,
    "cpuAssignedPercentUtil": 37.5}

SUPERVISOR_SUMMARY = {
    "supervisors": [{"id": "0b879808-2a26-442b-8f7d-23101e0c3696", "host": "10.11.1.7",
                     "uptime": "5m 58s", "uptimeSeconds": 358, "slotsTotal": 4,
                     "slotsUsed": 3, "totalMem": 3000.0, "totalCpu": 400.0,
                     "usedMem": 1280.0, "usedCPU": 160.0}],
    "schedulerDisplayResource": True}

SUPERVISOR = {
    "supervisors": SUPERVISOR_SUMMARY["supervisors"], "schedulerDisplayResource": True,
    "workers": [{"topologyName": "ras", "topologyId": "ras-4-1460229987",
                 "host": "192.168.10.237", "supervisorId": "bdfe8eff",
                 "assignedMemOnHeap": 704.0, "uptime": "2m 47s", "uptimeSeconds": 167,
                 "port": 6707, "workerLogLink": "http://host:8000/log?file=worker.log",
                 "componentNumTasks": {"word": 5}, "executorsTotal": 8,
                 "assignedCpu": 130.0, "assignedMemOffHeap": 80.0}]}

HISTORY_SUMMARY = {"topo-history": ["wc6-1-1446571009"]}

TOPOLOGY_WORKERS = {"hostPortList": [{"host": "192.168.202.2", "port": 6701}],
                    "logviewerPort": 8000}

TOPOLOGY_METRICS = {
    "window": ":all-time", "window-hint": "All time",
    "spouts": [{"id": "spout", "emitted": [{"stream_id": "default", "value": 17350280}],
                "transferred": [{"stream_id": "default", "value": 17350280}],
                "acked": [{"stream_id": "default", "value": 17339180}], "failed": [],
                "complete_ms_avg": [{"stream_id": "default", "value": "920.497"}]}],
    "bolts": [{"id": "count", "emitted": [{"stream_id": "default", "value": 190748180}],
               "transferred": [{"stream_id": "default", "value": 0}],
               "acked": [{"component_id": "split", "stream_id": "default",
                          "value": 190733160}], "failed": [],
               "process_ms_avg": [{"component_id": "split", "stream_id": "default",
                                   "value": "0.004"}],
               "executed": [{"component_id": "split", "stream_id": "default",
                             "value": 190733140}],
               "executed_ms_avg": [{"component_id": "split", "stream_id": "default",
                                    "value": "0.005"}]}]}

NIMBUS_SUMMARY = {
    "nimbuses": [{"host": "192.168.202.1", "port": 6627,
                  "nimbusLogLink": "http://192.168.202.1:8000/log?file=nimbus.log",
                  "status": "Leader", "version": "0.10.0-SNAPSHOT", "nimbusUpTime": "3m 33s",
                  "nimbusUpTimeSeconds": "213"}]}

TOPOLOGY_SUMMARY = {
    "topologies": [{"id": "WordCount3-1-1402960825", "name": "WordCount3",
                    "status": "ACTIVE", "uptime": "6m 5s", "uptimeSeconds": 365,
                    "tasksTotal": 28, "workersTotal": 3, "executorsTotal": 28,
                    "replicationCount": 1}],
    "schedulerDisplayResource": True}

_WINDOW_STATS = {"windowPretty": "10m 0s", "window": "600", "emitted": 397960,
                 "transferred": 213380, "completeLatency": "0.000", "acked": 213460,
                 "failed": 0}
_WORKER = {"topologyName": "WordCount3", "topologyId": "WordCount3-1-1402960825",
           "host": "my-host", "supervisorId": "9124ca9a-42e8-481e-9bf3-a041d9595430",
           "assignedMemOnHeap": 1452.0, "uptime": "27m 26s", "port": 6702,
           "workerLogLink": "logs", "componentNumTasks": {"spout": 2},
           "executorsTotal": 15, "uptimeSeconds": 1646, "assignedCpu": 260.0,
           "assignedMemOffHeap": 160.0}
_ERROR = {"lastError": "", "errorHost": "", "errorPort": NULLABLE, "errorWorkerLogLink": "",
          "errorTime": NULLABLE, "errorLapsedSecs": NULLABLE}

TOPOLOGY = {
    "name": "WordCount3", "id": "WordCount3-1-1402960825", "workersTotal": 3,
    "window": "600", "status": "ACTIVE", "tasksTotal": 28, "executorsTotal": 28,
    "uptime": "29m 19s", "uptimeSeconds": 1759, "msgTimeout": 30, "windowHint": "10m 0s",
    "schedulerDisplayResource": True, "workers": [_WORKER], "topologyStats": [_WINDOW_STATS],
    "spouts": [{"executors": 5, "emitted": 28880, "completeLatency": "0.000",
                "transferred": 28880, "acked": 0, "spoutId": "spout", "tasks": 5,
                "failed": 0, **_ERROR}],
    "bolts": [{"executors": 12, "emitted": 184580, "transferred": 0, "acked": 184640,
               "executeLatency": "0.048", "tasks": 12, "executed": 184620,
               "processLatency": "0.043", "boltId": "count", "capacity": "0.003",
               "failed": 0, **_ERROR}],
    "configuration": {"storm.id": "WordCount3-1-1402960825"}, "replicationCount": 1}

_COMPONENT = {"name": "WordCount3", "id": "spout", "componentType": "spout",
              "windowHint": "10m 0s", "executors": 5, "topologyId": "WordCount3-1-1402960825",
              "tasks": 5, "window": "600", "profilerActive": [],
              "profilingAndDebuggingCapable": True, "profileActionEnabled": True}

SPOUT_COMPONENT = {
    **_COMPONENT, "componentErrors": [],
    "spoutSummary": [_WINDOW_STATS],
    "outputStats": [{"stream": "default", "emitted": 28460, "transferred": 28460,
                     "completeLatency": "0", "acked": 0, "failed": 0}],
    "executorStats": [{"workerLogLink": "http://10.11.1.7:8000/log?file=worker-6701.log",
                       "emitted": 5720, "port": 6701, "completeLatency": "0.000",
                       "transferred": 5720, "host": "10.11.1.7", "acked": 0,
                       "uptime": "43m 4s", "uptimeSeconds": 2584, "id": "[24-24]",
                       "failed": 0}]}

SPOUT_COMPONENT_WITH_ERRORS = {
    **SPOUT_COMPONENT,
    "componentErrors": [{"errorTime": 1406006074000, "errorHost": "10.11.1.70",
                         "errorPort": 6701,
                         "errorWorkerLogLink": "http://10.11.1.7:8000/log?file=worker-6701.log",
                         "errorLapsedSecs": 16, "error": "java.lang.RuntimeException: ..."}]}

BOLT_COMPONENT = {
    **_COMPONENT, "componentType": "bolt", "id": "count",
    "boltStats": [{"windowPretty": "10m 0s", "window": "600", "transferred": 0,
                   "processLatency": "0.043", "acked": 0, "failed": 0, "emitted": 0,
                   "executed": 0, "executeLatency": "0.048"}],
    "inputStats": [{"component": "split", "encodedComponentId": "split",
                    "executeLatency": "0.048", "processLatency": "0.043", "executed": 0,
                    "acked": 0, "failed": 0, "stream": "default"}],
    "outputStats": [{"stream": "default", "emitted": 0, "transferred": 0}],
    "executorStats": [{"workerLogLink": "http://10.11.1.7:8000/log?file=worker-6701.log",
                       "emitted": 0, "port": 6701, "transferred": 0, "host": "10.11.1.7",
                       "acked": 0, "uptime": "43m 4s", "uptimeSeconds": 2584,
                       "id": "[24-24]", "failed": 0, "executed": 0, "executeLatency": "0.048",
                       "processLatency": "0.043", "capacity": "0.000"}],
    "componentErrors": []}


def mismatches(sample: Any, got: Any, where: str = "") -> list[str]:
    """Where ``got`` lacks a field of ``sample`` or holds another type (empty: it matches)."""
    if sample is None:
        ok = got is None or (isinstance(got, int | str) and not isinstance(got, bool))
        return [] if ok else [f"{where}: {got!r} is not a number, string or null"]
    if isinstance(sample, bool):
        return [] if isinstance(got, bool) else [f"{where}: {got!r} is not a boolean"]
    if isinstance(sample, int):
        ok = isinstance(got, int) and not isinstance(got, bool)
        return [] if ok else [f"{where}: {got!r} is not an integer"]
    if isinstance(sample, float):
        ok = isinstance(got, int | float) and not isinstance(got, bool)
        return [] if ok else [f"{where}: {got!r} is not a number"]
    if isinstance(sample, str):
        return [] if isinstance(got, str) else [f"{where}: {got!r} is not a string"]
    if isinstance(sample, list):
        if not isinstance(got, list):
            return [f"{where}: {type(got).__name__} is not an array"]
        if sample and not got:
            return [f"{where}: empty (the contract needs an element to check)"]
        return [m for i, g in enumerate(got) for m in mismatches(sample[0], g, f"{where}[{i}]")
                ] if sample else []
    assert isinstance(sample, dict)
    if not isinstance(got, dict):
        return [f"{where}: {type(got).__name__} is not an object"]
    out = []
    for k, v in sample.items():
        if k not in got:
            out.append(f"{where}.{k}: missing")
        elif k in FREE_FORM:
            out += [] if isinstance(got[k], dict) else [f"{where}.{k}: not an object"]
        else:
            out += mismatches(v, got[k], f"{where}.{k}")
    return out
