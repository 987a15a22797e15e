"""Exact word counts on Spark with Trident state: Storm-level replays (trees that time out
after their words were counted) and Spark-level replays (the bolts job killed mid-stream),
on SQLite and on PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.faults import EmitThenForgetEveryKth
from examples.groupings import Tag
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.reliability.retry import RetrySchedule
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.trident.codec import MapKind
from squall.dev.spark import SparkCluster
from squall.kafka import ensure_topics
from tests.integration.cluster import SPARK_SECRET
from tests.integration.helpers import (
    clients,
    committed_offsets,
    produce_source,
    supervised_services,
    wait_for,
)

pytestmark = pytest.mark.integration
PARTS = 2


def exact_word_count(name: str, source: str, kind: MapKind, state_dir: Path,
                     hops: int = 1) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    # Every 5th sentence is not acked the first time: its tree times out after its words
    # were counted, and the spout emits it again under a new root.
    b.set_bolt("split", EmitThenForgetEveryKth, 2, config={"k": 5, "state_dir": str(state_dir)}
               ).shuffle_grouping("sentences")
    up = "split"
    if hops == 2:  # a bolt between: a sentence's words reach a count task from both of its
        # tasks, and a replay routes them anew (shuffle)
        b.set_bolt("tag", Tag, 2, outputs=Tag.outputs).shuffle_grouping("split")
        up = "tag"
    b.persistent_aggregate("count", ["word"], "count", 2, kind=kind.value
                           ).fields_grouping(up, ["word"])
    return b.build(name, ackers=2, message_timeout_s=8, retry=RetrySchedule(initial_delay_ms=100))


def counts(url: str, spec: TopologySpec, kind: MapKind) -> Counter[str]:
    """The state's values (one table for all of its tasks: each key is one task's)."""
    store = open_store(url, StoreName(f"{spec.name}.count", 0, kind))
    out = Counter({str(w): v.val if kind is MapKind.TRANSACTIONAL else
                   v.curr if kind is MapKind.OPAQUE else v for (w,), v in store.items()})
    store.close()
    return out


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark standalone master and two workers (one core each), from PySpark's jars."""
    with SparkCluster(tmp_path_factory.mktemp("spark"), workers=2, secret=SPARK_SECRET) as c:
        yield c.master_url


@pytest.mark.parametrize(("db", "kind", "where"), [
    ("sqlite", MapKind.OPAQUE, "local"),
    ("sqlite", MapKind.OPAQUE, "two hops"),
    ("postgresql", MapKind.TRANSACTIONAL, "local"),
    ("sqlite", MapKind.NON_TRANSACTIONAL, "local"),
    # The bolts on a Spark cluster: tasks on two executors, the state in PostgreSQL.
    ("postgresql", MapKind.OPAQUE, "cluster"),
])
def test_counts_are_exact_under_storm_and_spark_replays(
        request: pytest.FixtureRequest, bootstrap: str, tmp_path: Path, db: str,
        kind: MapKind, where: str) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}" if db == "sqlite" else \
        str(request.getfixturevalue("postgres_url"))
    master = str(request.getfixturevalue("spark_cluster")) if where == "cluster" \
        else "local[2]"
    name = f"ex{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    spec = exact_word_count(name, source, kind, tmp_path / "once",
                            2 if where == "two hops" else 1)
    topo = tmp_path / "topology.json"
    topo.write_text(spec.to_json())
    ensure_topics(clients(bootstrap), {source: PARTS})
    lines = [f"the quick brown fox {i % 7} jumps over the lazy dog {i}".encode()
             for i in range(300)]

    # The bolts job runs supervised, as a worker runs it: restarted if it dies (a crash of
    # Spark's own under load is one more Spark-level replay, not a failed test).
    sup, bolts_cmd, acker, spout = supervised_services(topo, name, bootstrap, tmp_path, url,
                                                       master)

    def committed() -> int:
        sup.check()
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{name}.sentences", source, PARTS))

    def running() -> bool:
        sup.check()
        return "bolt queries running" in (tmp_path / "logs" / "bolts.log").read_text()

    try:
        with acker.start():
            sup.start("bolts", bolts_cmd)
            wait_for(running, 180, "the bolt queries")
            produce_source(bootstrap, source, lines, PARTS)
            with spout.start() as sp:
                # Spark-level: the job dies once words are being counted; it runs again.
                wait_for(lambda: committed() > 0, 240, "the first commits")
                victim = sup.children["bolts"].proc  # the job running now (maybe a restart)
                with contextlib.suppress(ProcessLookupError):  # it may have just died
                    os.kill(victim.pid, signal.SIGKILL)
                wait_for(lambda: committed() >= len(lines), 300, "every sentence committed")
                assert sup.children["bolts"].proc.pid != victim.pid, "not restarted"
                m = sp.metrics()
    finally:
        sup.stop(timeout_s=30)
    timeouts = m.get(f"squall_spout_failed_total{{component=sentences,reason=timeout,"
                     f"topology={name}}}", 0.0)
    assert timeouts >= 300 // 5 // 2, "the Storm-level replays did not happen"
    want = Counter(w for s in lines for w in s.decode().split())
    got = counts(url, spec, kind)
    if kind is MapKind.NON_TRANSACTIONAL:  # at least once, as Trident documents it
        assert all(got[w] >= want[w] for w in want) and got != want, "replays not counted"
        return
    assert got == want, {w: (got[w], want[w]) for w in want if got[w] != want[w]}


def test_the_spouts_committed_offsets_are_read_from_kafka(bootstrap: str) -> None:
    """What lets a stateful task drop the records of committed messages."""
    from confluent_kafka import Consumer, TopicPartition

    from services.bolts import clients as bolt_clients

    topic, group = f"cm-{uuid.uuid4().hex[:6]}", f"squall.cm.{uuid.uuid4().hex[:6]}"
    ensure_topics(clients(bootstrap), {topic: 2})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 3)],
             asynchronous=False)
    c.close()
    assert bolt_clients.spout_committed(bootstrap, {group: (topic,)}, now_s=1e9) == {
        f"{topic}:0": 7, f"{topic}:1": 3}
