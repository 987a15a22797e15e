"""A topology's lifecycle, as Storm's: each submission an id of its own; a kill removes
what belongs only to it, after the drain; a resubmission starts clean, or keeps the state
it asks for."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from squall.core.topology.builder import TopologyBuilder
from squall.kafka import ensure_topics
from tests.integration.cluster import TOKEN, ApiProcess
from tests.integration.helpers import clients, produce_source, wait_for

pytestmark = pytest.mark.integration
PARTS = 2


def exact_topology(name: str, source: str, split: int, tally: bool = False) -> dict[str, Any]:
    """Sentences -> split -> exact counts (Trident state); ``tally``: one bolt more."""
    b = TopologyBuilder()
    b.set_spout("sentences", [source], PARTS, scheme="text")
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", split,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.persistent_aggregate("count", ["word"], "count", 2, kind="opaque"
                           ).fields_grouping("split", ["word"])
    if tally:
        b.set_bolt("tally", "examples.wordcount:WordCount", 1,
                   outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    return b.build(name, ackers=1, message_timeout_s=60).to_dict()


def test_a_killed_topology_leaves_nothing_behind_and_a_changed_one_counts_exactly(
        cluster: dict[str, Any], bootstrap: str, tmp_path: Path) -> None:
    """Storm's lifecycle: each submission is an id of its own; a kill removes, after the
    drain, the internal topics, consumer groups and checkpoints of that id and says what it
    removed, and keeps its state (the default SQLite beside the checkpoints); the same name
    submitted again with another parallelism, then another bolt list, counts every sentence
    exactly (its state, topics and groups are its own)."""
    import subprocess
    import sys

    from squall.backends import default_state_path
    from squall.demo import state_counts
    from squall.kafka_clients import KafkaClients

    api: ApiProcess = cluster["api"]
    name = f"life{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: PARTS}, 30)
    admin = KafkaClients(bootstrap).admin()
    fed: list[bytes] = []

    def run(spec: dict[str, Any], more: int) -> str:
        r = http.post("/topologies", json=spec)
        assert r.status_code == 201, r.text
        tid = str(r.json()["id"])
        wait_for(lambda: all(b["running"] for b in http.get(
            f"/api/v1/topology/{tid}").json()["bolts"]), 180, f"the bolt queries of {tid}")
        batch = [f"the quick brown fox {len(fed) + i} jumps over {i % 5}".encode()
                 for i in range(more)]
        produce_source(bootstrap, source, batch, PARTS)
        fed.extend(batch)
        want = Counter(w for s in fed for w in s.decode().split())
        # A new id starts at the source's beginning: its counts are of every sentence.
        wait_for(lambda: counts(tid) == want, 180,
                 f"{tid} to count all {len(fed)} sentences exactly")
        return tid

    def counts(tid: str) -> Counter[str]:
        return state_counts(f"sqlite://{default_state_path(tmp_path / 'checkpoints', tid)}",
                            tid)

    def owned(tid: str) -> tuple[list[str], list[str]]:
        topics = [t for t in admin.list_topics(timeout=10).topics
                  if t.startswith(f"squall.{tid}.")]
        groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=20).valid
                  if g.group_id.startswith(f"squall.{tid}.")]
        return sorted(topics), sorted(groups)

    def kill(tid: str) -> str:
        topics, groups = owned(tid)
        assert f"squall.{tid}.acker" in topics and f"squall.{tid}.sentences" in groups
        done = subprocess.run(
            [sys.executable, "-m", "squall", "kill", name, "--wait", "2", "--follow",
             "--api", api.url, "--token", TOKEN], capture_output=True, text=True, timeout=400)
        assert done.returncode == 0, done
        # What the teardown says it removed, and what the broker shows.
        said = done.stdout.splitlines()[-1]
        assert said.startswith(f"teardown: {tid}: removed {len(topics) - 1} topics"), said
        assert f"kept squall.{tid}.dlq" in said and all(g in said for g in groups), said
        assert owned(tid) == ([f"squall.{tid}.dlq"], []), owned(tid)
        left = tmp_path / "checkpoints" / tid
        wait_for(lambda: all(p.name.startswith("state.db") for p in left.iterdir()), 60,
                 f"the bolts worker to remove the checkpoints of {tid}")
        return said

    with api.client() as http:
        first = run(exact_topology(name, source, split=2), 300)
        assert (tmp_path / "checkpoints" / first).is_dir()
        counted = counts(first)
        kill(first)
        assert counts(first) == counted  # the state is the user's: it stays
        second = run(exact_topology(name, source, split=1), 200)  # another parallelism
        assert second != first
        kill(second)
        third = run(exact_topology(name, source, split=2, tally=True), 100)  # another bolt
        assert len({first, second, third}) == 3
        assert [b["boltId"] for b in http.get(f"/api/v1/topology/{name}").json()["bolts"]] \
            == ["split", "count", "tally"]
        # Killed with --purge-state: its dead letters and its state go too.
        r = http.post(f"/topologies/{name}/kill", json={"wait_s": 0, "purge_state": True})
        assert r.status_code == 200, r.text

        def torn_down() -> bool:
            t = http.get(f"/teardowns/{third}")
            return t.status_code == 200 and bool(t.json()["done"])

        wait_for(torn_down, 120, f"the teardown of {third}")
        assert http.get(f"/teardowns/{third}").json()["kept"] == [] and owned(third) == ([], [])
        wait_for(lambda: not (tmp_path / "checkpoints" / third).exists(), 60,
                 f"the bolts worker to purge the state of {third}")
        assert counts(first) == counted  # an earlier id's state is not touched


def test_a_resubmission_that_keeps_the_state_counts_on_exactly_from_where_it_stopped(
        cluster: dict[str, Any], bootstrap: str, tmp_path: Path) -> None:
    """``--keep-state``: the same name submitted again with another parallelism of its
    stateless bolt keeps the killed submission's Trident state and starts its spout where
    the killed one's commits got to, so the counts go on exactly (not twice); a change the
    state depends on (the aggregate's parallelism) is refused, naming it."""
    from squall.backends import default_state_path
    from squall.demo import state_counts
    from squall.kafka import group_offsets
    from squall.kafka_clients import KafkaClients

    api: ApiProcess = cluster["api"]
    name = f"keep{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    ensure_topics(clients(bootstrap), {source: PARTS}, 30)
    kafka = KafkaClients(bootstrap)
    fed: list[bytes] = []

    def feed(n: int) -> Counter[str]:
        batch = [f"a lazy dog {len(fed) + i} naps under tree {i % 7}".encode()
                 for i in range(n)]
        produce_source(bootstrap, source, batch, PARTS)
        fed.extend(batch)
        return Counter(w for s in fed for w in s.decode().split())

    def counts(state_id: str) -> Counter[str]:
        return state_counts(
            f"sqlite://{default_state_path(tmp_path / 'checkpoints', state_id)}", state_id)

    def committed(tid: str) -> int:
        got = group_offsets(kafka, f"squall.{tid}.sentences", [source])
        return sum(got.get(source, {}).values())

    def running(tid: str) -> bool:
        return all(b["running"] for b in http.get(f"/api/v1/topology/{tid}").json()["bolts"])

    with api.client() as http:
        r = http.post("/topologies", json=exact_topology(name, source, split=2))
        assert r.status_code == 201, r.text
        first = str(r.json()["id"])
        wait_for(lambda: running(first), 180, f"the bolt queries of {first}")
        want = feed(300)
        wait_for(lambda: counts(first) == want and committed(first) == 300, 180,
                 f"{first} to count and commit all 300 sentences")
        r = http.post(f"/topologies/{first}/kill", json={"wait_s": 0})
        assert r.status_code == 200, r.text
        wait_for(lambda: http.get(f"/teardowns/{first}").status_code == 200 and bool(
            http.get(f"/teardowns/{first}").json()["done"]), 180, f"the teardown of {first}")

        refused = exact_topology(name, source, split=1)
        refused["bolts"][1]["parallelism"] = 3
        r = http.post("/topologies", params={"keep_state": ""}, json=refused)
        assert r.status_code == 409, r.text
        assert "component 'count': its parallelism was 2, now 3" in r.json()["detail"], r.text

        r = http.post("/topologies", params={"keep_state": name},
                      json=exact_topology(name, source, split=1))
        assert r.status_code == 201, r.text
        second = str(r.json()["id"])
        assert second != first and r.json()["state_of"] == first
        # It starts where the first one's spout had committed, before it reads anything.
        assert committed(second) == 300
        wait_for(lambda: running(second), 180, f"the bolt queries of {second}")
        want = feed(200)
        wait_for(lambda: committed(second) == 500, 180, f"{second} to commit 500 sentences")
        wait_for(lambda: counts(first) == want, 60,
                 f"{second} to count the 200 new sentences into {first}'s state, once")
        assert not (tmp_path / "checkpoints" / second / "state.db").exists()
        r = http.post(f"/topologies/{second}/kill", json={"wait_s": 0, "purge_state": True})
        assert r.status_code == 200, r.text
        # Its purge removes the state it kept: the first submission's.
        wait_for(lambda: not default_state_path(tmp_path / "checkpoints", first).exists(),
                 180, f"the purge of {second}'s state ({first}'s)")
