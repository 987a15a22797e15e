"""Workers under the control plane: a topology submitted over REST runs on registered
workers; a spout worker killed mid-stream has its tasks reassigned and no source message
is lost."""

from __future__ import annotations

import re
import signal
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from squall.kafka import ensure_topics
from tests.integration import storm_contract as sc
from tests.integration.cluster import TOKEN, ApiProcess
from tests.integration.helpers import (
    ServiceProcess,
    clients,
    committed_offsets,
    consume,
    produce_source,
    wait_for,
)
from tests.integration.test_topology_page import browse

pytestmark = pytest.mark.integration
PARTS = 2


def topology(name: str, source: str) -> dict[str, Any]:
    return {"name": name, "ackers": 1, "message_timeout_s": 30, "max_spout_pending": 500,
            "spouts": [{"name": "sentences", "topics": [source], "parallelism": PARTS}],
            "bolts": [
                {"name": "split", "class": "examples.wordcount:SplitSentenceBatch",
                 "parallelism": 2, "outputs": {"default": ["word"]},
                 "inputs": [{"component": "sentences"}]},
                {"name": "count", "class": "examples.wordcount:WordCountBatch",
                 "parallelism": 2, "outputs": {"default": ["word", "count"]},
                 "inputs": [{"component": "split", "grouping": "fields", "fields": ["word"]}]}]}


def test_a_killed_spout_worker_loses_no_source_message(cluster: dict[str, Any], bootstrap: str,
                                                      zookeeper: str) -> None:
    api: ApiProcess = cluster["api"]
    workers: dict[str, ServiceProcess] = cluster["workers"]
    name = f"wk{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: PARTS}, 30)
    http = api.client()
    # Submitted inactive: the spouts start once Spark runs the bolt queries.
    r = http.post("/topologies", json=topology(name, source), params={"activate": "false"})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]  # what its topics, groups and placements are named by
    assert tid.startswith(f"{name}-") and r.json()["name"] == name

    def storm() -> dict[str, Any]:
        out: dict[str, Any] = http.get(f"/api/v1/topology/{name}").json()
        return out

    wait_for(lambda: all(b["running"] for b in storm()["bolts"]), 180, "the bolt queries")
    assert http.post(f"/topologies/{name}/activate").status_code == 200

    def spout_tasks() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for w in http.get("/workers").json():
            for p in w["placements"]:
                if p["topology"] == tid and p["kind"] == "spout":
                    out.setdefault(w["id"], []).extend(p["tasks"])
        return out

    wait_for(lambda: len(spout_tasks()) == 2, 30, "one spout task on each spout worker")
    victim = sorted(w for w in workers if w.startswith("spoutA"))[0]
    survivor = sorted(w for w in workers if w.startswith("spoutB"))[0]
    assert spout_tasks()[victim] and spout_tasks()[survivor]

    def committed() -> int:
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{tid}.sentences", source, PARTS))

    first = [f"the quick brown fox jumps over the lazy dog {i}".encode() for i in range(1500)]
    produce_source(bootstrap, source, first, PARTS)
    wait_for(lambda: committed() >= 300, 120, "the topology to make progress")
    # Kill the worker like a lost machine: SIGKILL, its spout process dies with it.
    workers[victim].signal(signal.SIGKILL)
    workers[victim].wait(10)
    second = [f"a second wave of sentences number {i}".encode() for i in range(1500)]
    produce_source(bootstrap, source, second, PARTS)
    wait_for(lambda: sorted(spout_tasks().get(survivor, [])) == [0, 1], 60,
             "the lost worker's spout task to move to the survivor")
    total = len(first) + len(second)
    wait_for(lambda: committed() >= total, 180, f"all {total} sentences committed")
    assert committed() == total
    # Nothing was dead-lettered: every sentence completed.
    assert consume(bootstrap, f"squall.{tid}.dlq", 1, timeout_s=2) == []
    # The lost worker's registration is gone from ZooKeeper.
    zk = KazooClient(hosts=cluster["zookeeper"])
    zk.start(10)
    try:
        assert zk.exists(f"/squall/workers/{victim}") is None
    finally:
        zk.stop()
        zk.close()
    stats = storm()
    assert stats["status"] == "ACTIVE"
    assert stats["acker"]["treesFailed"] == 0
    # The bolts' numbers reach the API: every sentence executed and acked, every word emitted.
    words = sum(len(s.split()) for s in first + second)
    wait_for(lambda: storm()["bolts"][1]["acked"] >= words, 30, "the bolts' reports")
    split, count = storm()["bolts"]
    assert split["executed"] >= total and split["emitted"] >= words
    assert count["executed"] >= words and count["failed"] == 0
    assert float(split["executeLatency"]) > 0 and split["microBatches"] > 0
    # Storm's types: counts are integers (a typed client decodes them as int64).
    assert all(isinstance(split[k], int) for k in ("emitted", "executed", "acked", "failed"))
    # Storm's /lag: per topic and partition, the committed offset and the log's head. The
    # lag is in the processes' metrics, gathered every few seconds.
    def lag() -> dict[str, Any]:
        got: dict[str, Any] = http.get(f"/api/v1/topology/{name}/lag").json()
        return got

    def caught_up() -> bool:
        ps = lag()["sentences"]["spoutLagResult"].get(source, {}).values()
        return sum(p["consumerCommittedOffset"] for p in ps) >= total and all(
            p["lag"] == 0 for p in ps)

    wait_for(caught_up, 30, "the lag to show the commits")
    parts = lag()["sentences"]["spoutLagResult"][source]
    assert sorted(parts) == [str(p) for p in range(PARTS)]
    assert all(p["logHeadOffset"] == p["consumerCommittedOffset"] + p["lag"]
               for p in parts.values()), parts
    assert lag()["sentences"]["spoutType"] == "KAFKA"
    # ?sys=1 shows the ackers among the bolts, as Storm's __acker; without it they are not.
    assert "__acker" not in [b["boltId"] for b in storm()["bolts"]]
    sys_bolts = http.get(f"/api/v1/topology/{name}", params={"sys": 1}).json()["bolts"]
    assert sys_bolts[-1]["boltId"] == "__acker" and sys_bolts[-1]["acked"] >= total
    check_storm_shapes(http, tid, total)
    # An undecodable message: dead-lettered by the spout, which reports it as its error;
    # Storm's lastError and componentErrors show it, with where and when.
    produce_source(bootstrap, source, [b"\xff\xfe not text"], PARTS)
    wait_for(lambda: "undecodable" in storm()["spouts"][0]["lastError"], 30,
             "the spout's error to reach the API")
    sp = storm()["spouts"][0]
    assert sp["errorHost"] and sp["errorPort"] > 0 and sp["errorLapsedSecs"] >= 0
    comp = http.get(f"/api/v1/topology/{name}/component/sentences").json()
    assert sc.mismatches(sc.SPOUT_COMPONENT_WITH_ERRORS, comp, "component") == []
    assert "undecodable" in comp["componentErrors"][0]["error"]
    http.post(f"/topologies/{name}/kill", json={"wait_s": 0})
    http.close()


def check_storm_shapes(http: httpx.Client, name: str, total: int) -> None:
    """Storm UI's routes on a running topology: every field of Storm's documented samples,
    with Storm's types; the rolling windows; workers and executors."""
    top = f"/api/v1/topology/{name}"
    for path, sample in [("/api/v1/cluster/summary", sc.CLUSTER_SUMMARY),
                         ("/api/v1/supervisor/summary", sc.SUPERVISOR_SUMMARY),
                         ("/api/v1/nimbus/summary", sc.NIMBUS_SUMMARY),
                         ("/api/v1/topology/summary", sc.TOPOLOGY_SUMMARY),
                         (top, sc.TOPOLOGY), (f"{top}?window=600", sc.TOPOLOGY),
                         (f"{top}/component/sentences", sc.SPOUT_COMPONENT),
                         (f"{top}/component/split?window=10800", sc.BOLT_COMPONENT),
                         ("/api/v1/history/summary", sc.HISTORY_SUMMARY),
                         (f"/api/v1/topology-workers/{name}", sc.TOPOLOGY_WORKERS),
                         (f"{top}/metrics?window=600", sc.TOPOLOGY_METRICS)]:
        got = http.get(path)
        assert got.status_code == 200, (path, got.text)
        assert sc.mismatches(sample, got.json(), path) == []
    # A supervisor that runs some of the topology, with its processes (Storm's workers).
    sid = http.get(top).json()["workers"][0]["supervisorId"]
    one = http.get("/api/v1/supervisor", params={"id": sid}).json()
    assert sc.mismatches(sc.SUPERVISOR, one, "supervisor") == []
    assert [s["id"] for s in one["supervisors"]] == [sid]
    assert {w["supervisorId"] for w in one["workers"]} == {sid}
    assert http.get("/api/v1/supervisor").status_code == 400  # Storm needs id or host
    assert http.get("/api/v1/supervisor", params={"id": "ghost"}).status_code == 404
    assert http.get("/api/v1/owner-resources").status_code == 501
    conf = http.get("/api/v1/cluster/configuration").json()
    assert str(http.base_url).rstrip("/") in conf["nimbus.seeds"], conf
    # The windows hold what this API replica saw (it started before the topology): the
    # sentences acked, including those of the spout process that was killed, which the
    # processes' lifetime sums (":all-time") no longer hold.
    stats = {w["window"]: w for w in http.get(top).json()["topologyStats"]}
    assert stats["600"]["acked"] <= stats["10800"]["acked"] <= stats["86400"]["acked"]
    assert stats["86400"]["acked"] >= stats[":all-time"]["acked"] > 0
    assert stats["86400"]["acked"] >= total // 2, stats
    spout = http.get(f"{top}/component/sentences").json()
    assert sum(e["acked"] for e in spout["executorStats"]) == spout["acked"]
    assert {e["id"] for e in spout["executorStats"]} <= {"[0-0]", "[1-1]", "[0-1]"}
    # The visualization: the graph as Storm's UI draws it, each edge's stream labelled.
    vis = http.get(f"{top}/visualization", params={"window": "600"}).json()
    assert set(vis) == {"sentences", "split", "count"}
    assert [(i[":component"], i[":grouping"]) for i in vis["count"][":inputs"]] == [
        ("split", "fields")]
    assert vis["sentences"][":type"] == "spout" and vis["split"][":stats"]
    edge = vis["count"][":inputs"][0][":sani-stream"]
    assert sum(p[":transferred"]["600"].get(edge, 0) for p in vis["split"][":stats"]) > 0
    assert "__acker" in http.get(f"{top}/visualization", params={"sys": 1}).json()
    workers = http.get(top).json()["workers"]
    assert {"sentences", "split", "count", "__acker"} <= {
        c for w in workers for c in w["componentNumTasks"]}
    assert all(w["port"] > 0 and w["topologyId"] == name for w in workers)


def test_deactivate_stops_the_spouts_and_activate_resumes(cluster: dict[str, Any],
                                                         bootstrap: str) -> None:
    api: ApiProcess = cluster["api"]
    name = f"wd{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: PARTS}, 30)
    spec = topology(name, source)
    spec["bolts"] = spec["bolts"][:1]

    def running(kind: str) -> int:
        """Processes the workers run for this topology (their registered endpoints)."""
        return sum(1 for w in httpx.get(f"{api.url}/workers", timeout=10).json()
                   for e in w["running"] if e["topology"] == tid and e["kind"] == kind)

    with api.client() as http:
        r = http.post("/topologies", json=spec)
        assert r.status_code == 201
        tid = r.json()["id"]
        wait_for(lambda: running("spout") == 2 and running("acker") == 1, 60,
                 "a spout process on each spout worker, and the acker")
        assert http.post(f"/topologies/{name}/deactivate").json()["status"] == "INACTIVE"
        wait_for(lambda: running("spout") == 0, 60, "the spouts to drain and stop")
        assert running("acker") == 1  # the rest of the topology stays up
        assert http.post(f"/topologies/{name}/activate").json()["status"] == "ACTIVE"
        wait_for(lambda: running("spout") == 2, 60, "the spouts to start again")
        assert http.post(f"/topologies/{name}/kill", json={"wait_s": 0}).status_code == 200
        wait_for(lambda: running("spout") + running("acker") + running("bolts") == 0, 90,
                 "the killed topology's processes to stop")
    # The bolts job ran in the bolts worker's spare (Spark started before the topology came);
    # idle again, the worker starts a new spare for the next one.
    log = next(p.log for w, p in cluster["workers"].items() if w.startswith("bolts"))
    wait_for(lambda: log.read_text().count("started spare") == 2, 60, "a new spare")
    assert log.read_text().count(f"now runs {tid}.bolts") == 1


def test_a_bolt_that_cannot_start_is_a_crash_loop_shown_with_its_error_not_poison(
        cluster: dict[str, Any], bootstrap: str, tmp_path: Path) -> None:
    """The bolt's prepare fails on every record (its database is down): the bolts job exits
    and is restarted with backoff, a crash loop, shown with the error in the topology's
    view and ``squall status``; no record is failed for it, none is dead-lettered."""
    import subprocess
    import sys

    api: ApiProcess = cluster["api"]
    name = f"down{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: PARTS}, 30)
    spec = topology(name, source)
    spec["bolts"][0]["class"] = "examples.faults:DependencyDown"
    spec["bolts"][0]["config"] = {"url": "postgresql://db.example:5432"}
    http = api.client()
    r = http.post("/topologies", json=spec)
    assert r.status_code == 201
    tid = r.json()["id"]
    produce_source(bootstrap, source, [f"sentence {i}".encode() for i in range(50)], PARTS)

    def split() -> dict[str, Any]:
        got: dict[str, Any] = http.get(f"/api/v1/topology/{name}").json()["bolts"][0]
        return got

    wait_for(lambda: split()["crashLooping"], 600, "the bolts job's crash loop")
    assert "cannot reach postgresql://db.example:5432: connection refused" in \
        split()["lastExit"], split()
    status = subprocess.run(
        [sys.executable, "-m", "squall", "status", name, "--api", api.url, "--token", TOKEN],
        capture_output=True, text=True, timeout=60)
    assert "split: CRASH LOOP: " in status.stdout and "connection refused" in status.stdout, \
        status
    # ... and under the topology page's diagram, in a real browser.
    page = browse(f"{api.url}/ui/topologies/{name}", tmp_path, "--dump-dom")
    loops = re.findall(r'<div class="loop" data-component="split">(.*?)</div>', page.stdout)
    assert loops == [f"split: crash loop: bolt query {tid}.split stopped: ConnectionError: "
                     "cannot reach postgresql://db.example:5432: connection refused"], \
        re.findall(r'<div id="(?:err|loops)".*?</div>', page.stdout)
    assert consume(bootstrap, f"squall.{tid}.dlq", 1, timeout_s=2) == []
    assert http.get(f"/api/v1/topology/{name}").json()["acker"]["treesFailed"] == 0


