"""A micro-batch's way to its bolt tasks (services/bolts/job.py): the edge source ends it,
the driver's sink runs the chain's planned job, whose tasks plan their ranges from Spark's
offset log, read them and run the bolts. On the real broker and real Spark it runs every
tuple once, emits every word and acks every input, and its reports reach the metrics."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client import CollectorRegistry

from services.bolts import tasks_sink
from services.bolts.job import ensure_bolt_topics
from services.bolts.metrics import BoltMetrics
from services.bolts.planning import logged_partitions
from services.bolts.runtime.session import register_for_query
from services.bolts.source import EdgeSource
from services.bolts.tasks import BATCH_PROPERTY, planned_job
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.tuples import Tuple
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import edge_topic
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples
from squall.kafka import consume_ready
from tests.integration.helpers import clients, produce_source, wait_for

pytestmark = pytest.mark.integration

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away",
             "four score and seven years ago"] * 20
WORDS = Counter(w for s in SENTENCES for w in s.split())


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from services.bolts.runtime.session import spark_session

    session = spark_session("local[2]", "squall-batch-paths-test", java_options="-Xss4m")
    yield session
    session.stop()


def _topology() -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences", 1)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", "examples.wordcount:WordCount", 2).fields_grouping("split", ["word"])
    return b.build(f"paths{uuid.uuid4().hex[:6]}", ackers=1)


def _feed(bootstrap: str, spec: TopologySpec) -> None:
    """The sentences as the spout sends them: one tuple batch per split task."""
    ids = [int(i) for i in IdBatcher(seed=5).ids(len(SENTENCES))]
    batches = []
    for task in (0, 1):  # partition i % 2: task i's
        tuples = [Tuple([s], ("str",), {i: i})
                  for s, i in zip(SENTENCES[task::2], ids[task::2], strict=True)]
        batches.append(encode_tuples(TupleBatch.from_tuples(tuples, ("str",))))
    produce_source(bootstrap, spec.input_topics("split")[0], batches, 2)


def _words(bootstrap: str, topic: str) -> Counter[str]:
    """Every word tuple on the split -> count edge, to its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False})
    got: Counter[str] = Counter()
    try:
        for part in (0, 1):
            _, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
            c.assign([TopicPartition(topic, part, 0)])
            seen = 0
            while seen < high:
                for m in consume_ready(c, 1000, 1.0):
                    if m.error() is None:
                        seen = (m.offset() or 0) + 1
                        got.update(str(t[0]) for t in decode_tuples(m.value()).tuples())
    finally:
        c.close()
    return got


def test_a_micro_batch_runs_every_tuple_once(spark: Any, bootstrap: str,
                                             tmp_path: Path) -> None:
    spec = _topology()
    ensure_bolt_topics(spec, clients(bootstrap))
    _feed(bootstrap, spec)
    checkpoint = tmp_path / "ckpt"
    topics = spec.input_topics("split")
    registry = CollectorRegistry()
    metrics = BoltMetrics(registry, spec.name)
    query = f"{spec.name}.split"
    reader = (spark.readStream.format(register_for_query(spark, EdgeSource, query))
              .option("bootstrap", bootstrap).option("topics", ",".join(topics))
              .option("tasks", "0,1").option("max_rows", "100000").load())
    job = planned_job(spark.sparkContext, spec.to_json(), ("split",), bootstrap, {},
                      checkpoint, topics, 2, 2)
    stop = threading.Event()
    q = (tasks_sink.writer(reader, query, ("split",), job, BATCH_PROPERTY, metrics, stop)
         .option("checkpointLocation", str(checkpoint))
         .trigger(processingTime="50 milliseconds").queryName(query).start())
    labels = {"topology": spec.name, "component": "split"}

    def executed() -> float:
        return registry.get_sample_value("squall_bolt_executed_total", labels) or 0.0

    try:
        wait_for(lambda: executed() >= len(SENTENCES), 120, "every sentence executed")
    finally:
        q.stop()
        stop.set()
    assert logged_partitions(checkpoint, 0, topics, [0, 1])  # planned from the log
    assert executed() == len(SENTENCES)
    assert registry.get_sample_value("squall_bolt_acked_total", labels) == len(SENTENCES)
    assert registry.get_sample_value("squall_bolt_emitted_total", labels) == sum(WORDS.values())
    assert _words(bootstrap, edge_topic(spec.name, "split", "default", "count")) == WORDS


def _worker_memory(_: Any) -> Iterator[tuple[dict[str, str | None], str]]:
    import os

    import pyarrow as pa

    from services.bolts.runtime import heap

    yield ({k: os.environ.get(k) for k in heap.WORKER_ENV},
           pa.default_memory_pool().backend_name)


def test_the_python_workers_keep_their_memory(spark: Any) -> None:
    """The session gives its Python workers the memory settings that let a task's freed
    memory be used again without page faults (services/bolts/runtime/heap.py)."""
    from services.bolts.runtime import heap

    sc = spark.sparkContext
    got = sc.parallelize(range(2), 2).mapPartitions(_worker_memory).collect()
    assert got == [(heap.WORKER_ENV, "system")] * 2
