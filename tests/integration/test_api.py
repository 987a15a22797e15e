"""The REST surface on a real port (uvicorn) over the real ZooKeeper: every error case."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from kazoo.client import KazooClient

from squall import __version__
from squall.core.control.lifecycle import Status
from tests.integration.cluster import TOKEN, ApiProcess, namespace, zk_client
from tests.integration.helpers import wait_for

pytestmark = pytest.mark.integration


def spec(name: str, **over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name, "ackers": 2, "message_timeout_s": 30,
        "spouts": [{"name": "sentences", "topics": [f"src-{name}"], "parallelism": 2}],
        "bolts": [
            {"name": "split", "class": "examples.wordcount:SplitSentence", "parallelism": 2,
             "outputs": {"default": ["word"]}, "inputs": [{"component": "sentences"}]},
            {"name": "count", "class": "examples.wordcount:WordCount", "parallelism": 2,
             "outputs": {"default": ["word", "count"]},
             "inputs": [{"component": "split", "grouping": "fields", "fields": ["word"]}]}]}
    d.update(over)
    return d


@pytest.fixture
def http(api: ApiProcess) -> Iterator[httpx.Client]:
    with api.client() as c:
        yield c


@pytest.fixture
def zk(ns: str) -> Iterator[KazooClient]:
    c = zk_client(ns)
    yield c
    c.stop()
    c.close()


def zk_status(zk: KazooClient, tid: str) -> str:
    raw, _ = zk.get(f"/squall/topologies/{tid}")
    return str(json.loads(raw)["lifecycle"]["status"])


def test_submit_json_and_yaml_then_read_every_view(http: httpx.Client) -> None:
    r = http.post("/topologies", json=spec("views"))
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "ACTIVE" and r.json()["version"] == 0
    vid = r.json()["id"]  # Storm's name-counter-timestamp
    assert r.json()["name"] == "views" and re.fullmatch(r"views-\d+-\d+", vid), vid
    yaml_text = "name: views2\nspouts: [{name: s, topics: [x]}]\n"
    r = http.post("/topologies", content=yaml_text,
                  headers={"Content-Type": "application/yaml"}, params={"activate": "false"})
    assert r.status_code == 201 and r.json()["status"] == "INACTIVE"
    names = {t["name"] for t in http.get("/topologies").json()}
    assert {"views", "views2"} <= names
    one = http.get("/topologies/views")  # by its name, as by its id
    assert one.headers["etag"] == '"0"' and one.json()["spec"]["name"] == "views"
    assert one.json()["id"] == http.get(f"/topologies/{vid}").json()["id"] == vid
    summary = http.get("/api/v1/topology/summary").json()["topologies"]
    assert {"id": vid, "name": "views", "status": "ACTIVE"}.items() <= next(
        t for t in summary if t["id"] == vid).items()
    storm = http.get("/api/v1/topology/views").json()
    assert [s["spoutId"] for s in storm["spouts"]] == ["sentences"]
    assert [b["boltId"] for b in storm["bolts"]] == ["split", "count"]
    assert storm["msgTimeout"] == 30 and storm["tasksTotal"] == 8
    assert [w["window"] for w in storm["topologyStats"]] == ["600", "10800", "86400",
                                                             ":all-time"]
    assert storm["window"] == ":all-time" and storm["windowHint"] == "All time"
    assert http.get("/api/v1/topology/views", params={"window": "600"}).json()[
        "windowHint"] == "10m 0s"
    bad = http.get("/api/v1/topology/views", params={"window": "601"})
    assert bad.status_code == 422 and "600" in bad.text, bad.text
    comp = http.get("/api/v1/topology/views/component/count").json()
    assert comp["componentType"] == "bolt" and comp["tasks"] == 2
    acker = http.get("/api/v1/topology/views/component/__acker").json()
    assert acker["componentType"] == "bolt" and acker["tasks"] == 2  # Storm's system bolt
    cluster = http.get("/api/v1/cluster/summary").json()
    assert cluster["topologies"] >= 2 and cluster["thisReplicaLeads"]
    # No workers registered in this cluster: the leader reports every task unassigned.
    wait_for(lambda: f"{vid}/split/0" in http.get("/api/v1/cluster/summary").json()[
        "unassignedTasks"], 10, "the leader's round")
    assert f"{vid}/sentences/1" in http.get("/api/v1/cluster/summary").json()["unassignedTasks"]
    assert http.get("/docs").status_code == 200
    assert "/api/v1/topology/{topology_id}" in http.get("/openapi.json").json()["paths"]


@pytest.mark.parametrize(("body", "ctype", "needle"), [
    ({"spouts": []}, "json", "'name' is required"),
    (spec("bad1", colour="red"), "json", "unknown topology fields ['colour']"),
    (spec("bad2", ackers=-1), "json", "ackers must be 0..1024, got -1"),
    (spec("bad3", spouts=[{"name": "s", "topics": ["t"], "parallelism": 0}]), "json",
     "spout 's': parallelism must be 1..1024, got 0"),
    (spec("bad4", bolts=[{"name": "b", "class": "m:C", "inputs": [{"component": "ghost"}]}]),
     "json", "bolt 'b': input from unknown component 'ghost'"),
    (spec("bad5", bolts=[{"name": "b", "class": "m:C", "inputs": [
        {"component": "sentences", "grouping": "fields", "fields": ["nope"]}]}]), "json",
     "fields grouping on 'sentences' by ['nope']"),
    (spec("bad6", bolts=[{"name": "b", "class": "not a class", "inputs": [
        {"component": "sentences"}]}]), "json", "class 'not a class' must be 'module:Class'"),
    ("{not json", "json", "not valid JSON"),
    ("name: [unclosed", "yaml", "not valid JSON or YAML"),
    ([1, 2], "json", "a topology must be an object"),
])
def test_a_bad_spec_is_422_naming_the_problem(http: httpx.Client, body: Any, ctype: str,
                                              needle: str) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    r = http.post("/topologies", content=content,
                  headers={"Content-Type": f"application/{ctype}"})
    assert r.status_code == 422, r.text
    assert needle in r.json()["detail"]


#: What stays open when reads need a token: probes, the API's documents, the pages' shells.
OPEN = {"/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc",
        "/ui", "/ui/topologies/{topology_id}"}
OPERATOR_TOKEN, READER_TOKEN = "operator-token-0123456789-abcdefghij", \
    "reader-token-0123456789-abcdefghijklm"


def _routes(url: str) -> list[tuple[str, str, str]]:
    """Every route of the API's OpenAPI document: (method, template, a concrete path)."""
    doc = httpx.get(f"{url}/openapi.json", timeout=10).json()
    out = []
    for template, ops in doc["paths"].items():
        path = re.sub(r"\{(wait_time|partition|offset|dlq_offset)\}", "0", template)
        path = re.sub(r"\{[^}]+\}", "ghost", path)
        out += [(m.upper(), template, path) for m in ops]
    return out


def test_reads_are_open_unless_the_setting_closes_them(api: ApiProcess, zookeeper: str,
                                                       bootstrap: str, tmp_path: Path) -> None:
    """Storm UI's reads need no token by default (monitoring scripts send none), writes do;
    ``--reads-need-token`` closes every route of the OpenAPI document to a caller without a
    role's token (the probes, the API's documents and the pages' shells excepted), and a
    reader's token opens the reads and no write."""
    assert httpx.get(f"{api.url}/api/v1/topology/summary", timeout=10).status_code == 200
    assert httpx.post(f"{api.url}/api/v1/topology/x/activate", timeout=10).status_code == 401
    closed = ApiProcess(namespace(zookeeper), bootstrap, tmp_path / "closed.log",
                        "--reads-need-token", env={"SQUALL_API_OPERATOR_TOKEN": OPERATOR_TOKEN,
                                                   "SQUALL_API_READER_TOKEN": READER_TOKEN})
    closed.start()
    routes = _routes(closed.url)
    assert {t for _, t, _ in routes} >= {"/metrics", "/sd/prometheus", "/teardowns",
                                         "/topologies/{topology_id}/dead-letters"}
    try:
        with closed.client(token=None) as anon, closed.client(READER_TOKEN) as reader, \
                closed.client(token="wrong-token-0123456789-abcdefghijklmn") as wrong:
            for method, template, path in routes:
                r = anon.request(method, path)
                if template in OPEN and method == "GET":
                    assert r.status_code == 200, (method, path, r.status_code)
                    continue
                assert r.status_code == 401 and "bearer token" in r.json()["detail"], \
                    (method, path, r.text)
                assert wrong.request(method, path).status_code == 403, (method, path)
                r = reader.request(method, path)
                if method == "GET":  # a read: no longer refused for the caller
                    assert r.status_code not in (401, 403), (method, path, r.text)
                else:
                    assert r.status_code == 403 and "reader role" in r.json()["detail"], \
                        (method, path, r.text)
        # The pages hold no data (their scripts read with the token): open, saying nothing
        # of which topologies exist.
        for path in ("/ui", "/ui/topologies/ghost"):
            r = httpx.get(closed.url + path, timeout=10)
            assert r.status_code == 200 and "token-form" in r.text, path
    finally:
        closed.stop()


def test_an_operator_operates_an_admin_submits_and_every_call_is_audited(
        zookeeper: str, bootstrap: str, tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    p = ApiProcess(namespace(zookeeper), bootstrap, log,
                   env={"SQUALL_API_OPERATOR_TOKEN": OPERATOR_TOKEN})
    p.start()
    try:
        with p.client(OPERATOR_TOKEN) as operator, p.client() as admin:
            r = operator.post("/topologies", json=spec("roles"))
            assert r.status_code == 403 and "needs the admin role" in r.json()["detail"]
            assert admin.post("/topologies", json=spec("roles")).status_code == 201
            assert operator.post("/topologies/roles/deactivate").status_code == 200
            assert operator.post("/api/v1/topology/roles/activate").status_code == 200
        text = log.read_text()
        for line in ("POST /topologies by operator from 127.0.0.1: 403",
                     "POST /topologies by admin from 127.0.0.1: 201",
                     "POST /topologies/roles/deactivate by operator from 127.0.0.1: 200",
                     "POST /api/v1/topology/roles/activate by operator from 127.0.0.1: 200"):
            assert line in text, line
        assert TOKEN not in text and OPERATOR_TOKEN not in text
    finally:
        p.stop()


def test_unknown_ids_are_404(http: httpx.Client) -> None:
    for method, path in [("GET", "/topologies/ghost"), ("POST", "/topologies/ghost/activate"),
                         ("POST", "/topologies/ghost/kill"), ("GET", "/api/v1/topology/ghost"),
                         ("POST", "/api/v1/topology/ghost/kill/0")]:
        r = http.request(method, path)
        assert r.status_code == 404, (path, r.text)
        assert "ghost" in r.json()["detail"]
    http.post("/topologies", json=spec("comp404"))
    r = http.get("/api/v1/topology/comp404/component/nope")
    assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_mutating_routes_need_the_token(api: ApiProcess) -> None:
    with api.client(token=None) as anon, \
            api.client(token="wrong-token-0123456789-abcdefghijklmn") as wrong:
        r = anon.post("/topologies", json=spec("auth"))
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert wrong.post("/topologies", json=spec("auth")).status_code == 403
        assert wrong.post("/api/v1/topology/auth/kill/0").status_code == 403
        assert anon.get("/topologies").status_code == 200  # reads are open
        assert anon.get("/topologies/auth").status_code == 404  # nothing was submitted


def test_lifecycle_transitions_land_in_zookeeper(http: httpx.Client, zk: KazooClient) -> None:
    r = http.post("/topologies", json=spec("life"))
    assert r.status_code == 201
    lid = r.json()["id"]
    assert zk_status(zk, lid) == Status.ACTIVE
    assert http.post("/topologies/life/deactivate").json()["status"] == "INACTIVE"
    assert zk_status(zk, lid) == Status.INACTIVE
    storm = http.post("/api/v1/topology/life/activate").json()
    assert storm == {"topologyOperation": "activate", "topologyId": lid, "status": "success"}
    assert zk_status(zk, lid) == Status.ACTIVE
    # A second submit of a running name is a conflict, naming the live one.
    r = http.post("/topologies", json=spec("life"))
    assert r.status_code == 409 and f"already submitted (id {lid})" in r.json()["detail"]
    # Kill with a wait: KILLED at once, activate refused, removed after the wait.
    assert http.post("/api/v1/topology/life/kill/1").status_code == 200
    assert zk_status(zk, lid) == Status.KILLED
    r = http.post("/topologies/life/activate")
    assert r.status_code == 409 and "KILLED" in r.json()["detail"]
    wait_for(lambda: zk.exists(f"/squall/topologies/{lid}") is None, 15,
             "the kill to remove it")
    assert http.get("/topologies/life").status_code == 404
    # The name is free; the new submission is a new id: nothing of the old one is its.
    again = http.post("/topologies", json=spec("life"))
    assert again.status_code == 201 and again.json()["id"] not in (lid, "life")


def test_rebalance_drains_then_applies_spout_parallelism(http: httpx.Client,
                                                         zk: KazooClient) -> None:
    rid = http.post("/topologies", json=spec("reb")).json()["id"]
    r = http.post("/topologies/reb/rebalance", json={"wait_s": 1, "parallelism": {"split": 4}})
    assert r.status_code == 422 and "1..2 executors, not 4" in r.json()["detail"]
    r = http.post("/topologies/reb/rebalance", json={"wait_s": 1,
                                                     "parallelism": {"sentences": 1}})
    assert r.status_code == 200 and r.json()["status"] == "REBALANCING"
    assert http.post("/topologies/reb/activate").status_code == 409
    wait_for(lambda: zk_status(zk, rid) == Status.ACTIVE, 15, "the rebalance to finish")
    # Reads come from the API's mirror of ZooKeeper, which follows it a moment later.
    wait_for(lambda: http.get("/topologies/reb").json()["spec"]["spouts"][0]["parallelism"]
             == 1, 15, "the API to show the spout's new parallelism")
    r = http.post("/api/v1/topology/reb/rebalance/0", json={"rebalanceOptions": {
        "executors": {"sentences": 0}}})
    assert r.status_code == 422  # executors must be >= 1
    # A bolt rebalances by executors as in Storm: 1..its tasks.
    r = http.post("/api/v1/topology/reb/rebalance/0", json={"rebalanceOptions": {
        "executors": {"split": 1}}})
    assert r.status_code == 200, r.text
    wait_for(lambda: zk_status(zk, rid) == Status.ACTIVE, 15, "the rebalance to finish")

    def split_sizes() -> tuple[int, int]:
        split = next(b for b in http.get("/api/v1/topology/reb").json()["bolts"]
                     if b["boltId"] == "split")
        return split["tasks"], split["executors"]

    wait_for(lambda: split_sizes() == (2, 1), 15, "the API to show the bolt's executors")
    r = http.post("/api/v1/topology/reb/rebalance/0", json={"rebalanceOptions": {
        "numWorkers": 3, "executors": {"sentences": 2}}})
    assert r.status_code == 422 and "numWorkers (3) has no meaning" in r.json()["detail"]


def test_concurrent_edits_one_wins_the_other_gets_409(http: httpx.Client) -> None:
    http.post("/topologies", json=spec("race"))
    version = http.get("/topologies/race").json()["version"]
    r = http.post("/topologies/race/deactivate", headers={"If-Match": str(version + 7)})
    assert r.status_code == 409 and "version" in r.json()["detail"]
    results: list[int] = []
    barrier = threading.Barrier(2)

    def edit(op: str) -> None:
        barrier.wait()
        results.append(http.post(f"/topologies/race/{op}",
                                 headers={"If-Match": f'"{version}"'}).status_code)

    threads = [threading.Thread(target=edit, args=(op,)) for op in ("deactivate", "kill")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200, 409]


def test_bad_bodies_and_paths_are_4xx_never_5xx(http: httpx.Client) -> None:
    http.post("/topologies", json=spec("bodies"))
    assert http.post("/topologies/bodies/kill", json={"wait_s": -3}).status_code == 422
    assert http.post("/topologies/bodies/kill", content=b"\xff\xfe",
                     headers={"Content-Type": "application/json"}).status_code == 422
    assert http.post("/api/v1/topology/bodies/kill/abc").status_code == 422
    assert http.get("/topologies/" + "x" * 300).status_code == 422
    assert http.post("/topologies", content=b"\xff\xfe").status_code == 422


def test_the_caller_is_checked_before_the_body_is_read(api: ApiProcess) -> None:
    with api.client(token=None) as anon:
        r = anon.post("/topologies/x/kill", content=b"{not json",
                      headers={"Content-Type": "application/json"})
        assert r.status_code == 401, r.text
        r = anon.post("/topologies", content=b"x" * 3_000_000)  # not even its size matters
        assert r.status_code == 401, r.text


def test_a_body_that_is_not_json_is_400_in_the_error_shape(http: httpx.Client) -> None:
    r = http.post("/topologies/x/kill", content=b"0}K\xff\xfe",
                  headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json() == {"error": "bad_request", "detail": "There was an error parsing the body"}


def test_hostile_bodies_are_refused_and_the_api_stays_well(http: httpx.Client) -> None:
    r = http.post("/topologies", content=b"x" * 3_000_000)
    assert r.status_code == 413 and "at most" in r.json()["detail"], r.text
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
        for i in range(9))
    r = http.post("/topologies", content=bomb, headers={"Content-Type": "application/yaml"})
    assert r.status_code == 422 and "aliases" in r.json()["detail"], r.text
    for deep in ("[" * 60_000 + "]" * 60_000, '{"a":' * 20_000 + "1" + "}" * 20_000):
        r = http.post("/topologies", content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and "nests deeper" in r.json()["detail"], r.text
    r = http.post("/topologies", json=spec("n" * 250))
    assert r.status_code == 422 and "at most 64" in r.json()["detail"], r.text
    cyc = spec("cyc")
    cyc["bolts"][0]["inputs"] = [{"component": "count"}]
    r = http.post("/topologies", json=cyc)
    assert r.status_code == 422 and "split <- count <- split" in r.json()["detail"], r.text
    typo = spec("typo")
    typo["spouts"][0]["paralelism"] = 4
    r = http.post("/topologies", json=typo)
    assert r.status_code == 422 and "['paralelism']" in r.json()["detail"], r.text
    assert http.post("/topologies", json=spec("after")).status_code == 201  # still writes
    r = http.post("/topologies/after/deactivate", headers={"If-Match": "not-a-version"})
    assert r.status_code == 400 and "If-Match" in r.json()["detail"], r.text


def test_reads_come_from_memory_that_follows_zookeeper(http: httpx.Client,
                                                       zk: KazooClient) -> None:
    """A write is seen at once by the replica that made it; a change made in ZooKeeper by
    anyone else reaches the read routes through the watches."""
    mid = http.post("/topologies", json=spec("mirror")).json()["id"]
    ids = [t["id"] for t in http.get("/api/v1/topology/summary").json()["topologies"]]
    assert mid in ids  # read-your-writes, no wait
    assert http.post("/topologies/mirror/deactivate").status_code == 200
    assert http.get("/topologies/mirror").json()["status"] == "INACTIVE"
    zk.delete(f"/squall/topologies/{mid}")  # behind the API's back
    wait_for(lambda: mid not in [t["id"] for t in http.get(
        "/api/v1/topology/summary").json()["topologies"]], 10, "the watch to remove it")
    assert http.get("/topologies/mirror").status_code == 404


def test_health_and_readiness(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    r = http.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"] == {"zookeeper": "ok", "kafka": "ok"}


def test_readyz_reports_a_broker_that_is_down(ns: str, tmp_path: Path) -> None:
    p = ApiProcess(ns, "127.0.0.1:1", tmp_path / "api.log").start()
    try:
        r = httpx.get(f"{p.url}/readyz", timeout=10)
        assert r.status_code == 503 and r.json()["checks"]["kafka"] == "unavailable"
    finally:
        p.stop()


@pytest.mark.parametrize("path", ["/api/v1/topology/views/profiling/start/w1/10",
                                  "/api/v1/topology/views/logconfig",
                                  "/api/v1/logviewer/daemonlog", "/api/v1/drpc/f/x",
                                  "/api/v1/topology/views/component/split/debug/enable/10",
                                  "/api/v1/owner-resources"])
def test_storm_routes_that_mean_nothing_here_say_so(http: httpx.Client, path: str) -> None:
    r = http.get(path)
    assert r.status_code == 501, r.text
    assert r.json()["error"] == "not implemented" and "Squall has no" in r.json()["detail"]


def test_leader_failover_and_forwarded_writes(ns: str, bootstrap: str, api: ApiProcess,
                                              tmp_path: Path) -> None:
    a = ApiProcess(ns, bootstrap, tmp_path / "a.log").start()
    b = ApiProcess(ns, bootstrap, tmp_path / "b.log").start()
    try:
        assert api.leads() and not a.leads() and not b.leads()
        with b.client() as cb:  # Storm's nimbus summary: every replica, the leader first
            def nimbuses() -> list[dict[str, Any]]:
                found: list[dict[str, Any]] = cb.get("/api/v1/nimbus/summary").json()[
                    "nimbuses"]
                return found
            wait_for(lambda: len(nimbuses()) == 3, 30, "three replicas in the summary")
            ns_ = nimbuses()
            assert [n["status"] for n in ns_] == ["Leader", "Not a Leader", "Not a Leader"]
            assert f"http://{ns_[0]['host']}:{ns_[0]['port']}" == api.url
            assert {f"http://{n['host']}:{n['port']}" for n in ns_} == {api.url, a.url, b.url}
            assert all(n["version"] == __version__ and n["nimbusUpTimeSeconds"].isdigit()
                       for n in ns_)
        with a.client() as ca:
            r = ca.post("/topologies", json=spec("forwarded"))
            assert r.status_code == 201, r.text  # a follower forwards to the leader
            assert r.headers["x-squall-leader"] == api.url
            assert ca.get("/topologies/forwarded").json()["status"] == "ACTIVE"
        api.stop(9)  # SIGKILL: the session expires, the next replica leads
        wait_for(lambda: a.leads() or b.leads(), 30, "a new leader")
        new = a if a.leads() else b
        other = b if new is a else a
        with new.client() as c:
            assert c.post("/topologies/forwarded/deactivate").json()["status"] == "INACTIVE"
        with other.client() as c:
            r = c.post("/topologies/forwarded/activate")
            assert r.status_code == 200 and r.headers["x-squall-leader"] == new.url
    finally:
        a.stop()
        b.stop()
        api.start()  # the module's replica again, for the tests after this one
        wait_for(api.leads, 30, "the module's replica to lead again")


def test_message_and_dead_letter_routes_answer_for_a_topology(api: ApiProcess,
                                                              http: httpx.Client) -> None:
    """With no process running it (the API alone): the message is unknown, no letters;
    replay needs the token and refuses a letter that is not there."""
    r = http.post("/topologies", json=spec("letters"))
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    got = http.get("/topologies/letters/messages/src-letters/0/5")
    assert got.status_code == 200, got.text
    assert got.json()["state"] == "unknown" and got.json()["committed_offset"] == -1
    assert "(not running?)" in got.json()["summary"]
    assert http.get("/topologies/letters/messages/elsewhere/0/5").status_code == 404
    assert http.get("/topologies/letters/messages/src-letters/-1/5").status_code == 422
    listed = http.get(f"/topologies/{tid}/dead-letters").json()
    assert listed == {"total": 0, "by_reason": {}, "letters": [], "scanned_from": 0,
                      "scanned_to": 0, "older": 0}
    assert http.get(f"/topologies/{tid}/dead-letters/3").status_code == 404
    with api.client(token=None) as anon:
        assert anon.post(f"/topologies/{tid}/dead-letters/replay",
                         json={"offsets": [3]}).status_code == 401
    done = http.post(f"/topologies/{tid}/dead-letters/replay", json={"offsets": [3]})
    assert done.status_code == 200, done.text
    assert done.json() == {"replayed": [], "already": [], "would_replay": [],
                           "refused": [{"dlq_offset": 3, "why": "no such dead letter"}]}
    # a bulk replay names a reason, or says all; never an empty reason
    for body, why in (({"reason": ""}, "at least 1 character"),
                      ({"reason": "x", "all": True}, "choose one"),
                      ({"offsets": [3], "all": True}, "choose one")):
        bad = http.post(f"/topologies/{tid}/dead-letters/replay", json=body)
        assert bad.status_code == 422 and why in bad.text, bad.text
    dry = http.post(f"/topologies/{tid}/dead-letters/replay",
                    json={"all": True, "dry_run": True})
    assert dry.status_code == 200 and dry.json()["would_replay"] == [], dry.text
    # the CLI says the same
    cli = [sys.executable, "-m", "squall"]
    env = {**os.environ, "SQUALL_API_URL": api.url, "SQUALL_API_TOKEN": TOKEN}
    traced = subprocess.run([*cli, "trace", "src-letters", "0", "5"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert traced.returncode == 0 and "(not running?)" in traced.stdout, traced.stderr
    listed_cli = subprocess.run([*cli, "dead-letters", "list", "--topology", tid], env=env,
                                capture_output=True, text=True, timeout=60)
    assert listed_cli.returncode == 0 and listed_cli.stdout.startswith("0 dead letters")
    refused = subprocess.run([*cli, "dead-letters", "replay", "3", "--topology", tid],
                             env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "3: not replayed: no such dead letter" in refused.stdout
    empty = subprocess.run([*cli, "dead-letters", "replay", "--reason", "", "--topology", tid],
                           env=env, capture_output=True, text=True, timeout=60)
    assert empty.returncode == 2 and "--reason needs text" in empty.stderr
    dry_cli = subprocess.run([*cli, "dead-letters", "replay", "--all", "--dry-run",
                              "--topology", tid], env=env, capture_output=True, text=True,
                             timeout=60)
    assert dry_cli.returncode == 0 and dry_cli.stdout.startswith("would replay 0"), (
        dry_cli.stdout + dry_cli.stderr)


class _Recorder(BaseHTTPRequestHandler):
    """Answers every GET with an empty exposition and remembers the path."""

    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(b"# nothing\n")

    def log_message(self, *_: Any) -> None:
        pass


def test_a_forged_worker_registration_gets_no_fetch_beyond_its_own_host(
        http: httpx.Client, zk: KazooClient) -> None:
    """Anyone who can write ZooKeeper can register a worker. Its endpoint URLs are fetched
    only on the host it registered as, over http(s), with no redirect followed: a file, a
    third host and a redirect to one get nothing, and the API says why where it was asked."""
    elsewhere_hits: list[str] = []
    here_hits: list[str] = []
    elsewhere = ThreadingHTTPServer(("127.0.0.2", 0),
                                    type("Elsewhere", (_Recorder,), {"hits": elsewhere_hits}))
    other = f"http://127.0.0.2:{elsewhere.server_port}"

    class Redirect(_Recorder):
        hits = here_hits

        def do_GET(self) -> None:
            self.hits.append(self.path)
            self.send_response(302)
            self.send_header("Location", f"{other}/metrics")
            self.end_headers()

    here = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    for srv in (elsewhere, here):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    r = http.post("/topologies", json=spec("forged"))
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    ends = [{"topology": tid, "kind": "spout", "component": "sentences", "tasks": [0],
             "url": f"{other}/metrics", "process": "p1"},
            {"topology": tid, "kind": "acker", "component": "__acker", "tasks": [0],
             "url": f"http://127.0.0.1:{here.server_port}/metrics", "process": "p2"},
            {"topology": "", "kind": "worker", "component": "", "url": "file:///etc/passwd"}]
    info = {"id": "forged-1", "kind": "acker", "capacity": 1, "host": "127.0.0.1", "pid": 1,
            "started_ms": 0, "endpoints": ends, "stopping": [], "session": ""}
    zk.create("/squall/workers/forged-1", json.dumps(info).encode(), ephemeral=True)
    try:
        wait_for(lambda: any(w["id"] == "forged-1" for w in http.get("/workers").json()), 30,
                 "the API to see the forged worker")
        # a scrape round reached the endpoint on its own host, and followed no redirect
        wait_for(lambda: "/metrics" in here_hits, 30, "a scrape of the registered host")
        traced = http.get(f"/topologies/{tid}/messages/src-forged/0/0")
        assert traced.status_code == 200, traced.text
        assert traced.json()["where"] is None
        logs = http.get(f"/topologies/{tid}/logs/sentences")
        assert logs.status_code == 503, logs.text
        assert "only http or https is fetched, not file" in logs.json()["detail"]
        assert elsewhere_hits == []
        assert http.get("/readyz").status_code == 200
    finally:
        zk.delete("/squall/workers/forged-1")
        for srv in (elsewhere, here):
            srv.shutdown()
            srv.server_close()


def test_a_submission_that_would_run_foreign_code_or_carry_a_secret_is_refused(
        http: httpx.Client) -> None:
    """Over the real API: a class from a module not allowed, a sink that would name its own
    brokers, a state URL with a password: each 422 naming where, the secret never echoed,
    nothing stored."""
    base = spec("policy")
    foreign = {**base, "bolts": [{**base["bolts"][0], "class": "os:system"}, base["bolts"][1]]}
    r = http.post("/topologies", json=foreign)
    assert r.status_code == 422 and "'os:system'" in r.json()["detail"] \
        and "SQUALL_ALLOWED_MODULES" in r.json()["detail"], r.text
    sink = {**base, "bolts": [*base["bolts"], {
        "name": "out", "class": "squall.kafka_bolt:KafkaBolt",
        "inputs": [{"component": "count", "grouping": "fields", "fields": ["word"]}],
        "config": {"topic": "out", "message.field": "word",
                   "producer": {"bootstrap.servers": "attacker.example:9092"}}}]}
    r = http.post("/topologies", json=sink)
    assert r.status_code == 422 and "bootstrap.servers" in r.json()["detail"], r.text
    assert "attacker.example" not in r.text
    stateful = {**base, "bolts": [base["bolts"][0], {
        "name": "count", "class": "squall.trident:PersistentAggregate", "parallelism": 2,
        "outputs": {"default": ["word", "count"]},
        "inputs": [{"component": "split", "grouping": "fields", "fields": ["word"]}],
        "config": {"group_by": ["word"], "aggregator": "count",
                   "state": {"url": "postgresql://squall:hunter2-secret@db/squall"}}}]}
    r = http.post("/topologies", json=stateful)
    assert r.status_code == 422 and "state.url" in r.json()["detail"], r.text
    assert "hunter2" not in r.text
    assert http.get("/topologies/policy").status_code == 404
