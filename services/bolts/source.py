"""A Python streaming data source over a bolt's edge topics (``format("squall_edges")``).

The source tells Spark where each micro-batch ends; it reads no tuple. Offsets are
``{"topic:partition": offset}``; bolt task ``t`` takes partition ``t`` of every input
topic, so one task's tuples stay together. The micro-batch's job plans each task's
ranges from Spark's offset log and the tasks read them from Kafka themselves
(services/bolts/planning.py, services/bolts/edges.py): the tuples never pass through the
JVM. ``read`` yields only a task's ranges, ``(task, topic, partition, start, end)``.
``max_rows`` bounds a micro-batch (Kafka messages, each a batch of tuples). The end of
a partition is learnt from the high watermark of a fetch response, which every broker
gets right (ListOffsets, not always: docs/kafka.md).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from services.bolts.planning import TaskPartition, edge_key, next_offsets, plan_partitions
from squall import lease
from squall.core.reliability.linger import Linger
from squall.kafka_clients import from_environment

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = "task int, topic string, partition int, start long, end long"
#: How often a lingering offer looks at the edges' ends again.
LINGER_POLL_S = 0.005

log = logging.getLogger("squall.bolts.source")


class EdgeSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "squall_edges"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> EdgeReader:
        return EdgeReader(self.options)


class EdgeReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.bootstrap = options["bootstrap"]
        self.topics = [t for t in options["topics"].split(",") if t]
        self.tasks = [int(t) for t in options["tasks"].split(",") if t]
        self.max_rows = int(options.get("max_rows", "2000"))
        self._linger = Linger(**{k: int(options[k]) for k in ("quiet_ms", "linger_ms")
                                 if k in options})
        self._ends: EdgeEnds | None = None
        # The worker's lease (squall/core/control/lease.py): no batch is planned while it has
        # run out (its tasks may have moved meanwhile).
        self._lease = lease.check(options.get("lease", ""))

    def initialOffset(self) -> dict[str, int]:
        # Deterministic (it is called again when batch 0 is replayed): the topic start.
        return {edge_key(t, p): 0 for t in self.topics for p in self.tasks}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        if not self._lease.holds():
            return start  # nothing new: Spark plans no batch
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = self._high_watermarks()
        # After an idle spell, wait for the burst to land (squall/core/reliability/linger.py).
        while not self._linger.ready(int(time.monotonic() * 1000), start, ends, budget):
            time.sleep(LINGER_POLL_S)
            ends = self._high_watermarks()
        end = next_offsets(start, ends, budget)
        self._linger.offered(start, end)
        return end

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[TaskPartition]:
        return plan_partitions(self.topics, self.tasks, start, end)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, TaskPartition)
        yield range_batch(partition.task, partition.ranges)

    def commit(self, end: dict[str, int]) -> None:
        """Spark's checkpoint is the record of progress; nothing to do in Kafka."""

    def stop(self) -> None:
        if self._ends is not None:
            self._ends.close()
            self._ends = None

    def _high_watermarks(self) -> dict[str, int]:
        if self._ends is None:
            self._ends = EdgeEnds(self.bootstrap,
                                  [(t, p) for t in self.topics for p in self.tasks], hold=False)
        return self._ends.poll()


class EdgeEnds:
    """The ends of edge partitions, from fetch responses (a long-lived consumer).

    Each fetch response carries the partition's high watermark, so the ends come
    without a ListOffsets round trip per partition. The data itself is not wanted,
    and fetching it is what costs: a consumer reading an edge continuously (100
    fetches a second) reads every edge record twice. So the consumer holds at most
    one fetched message per partition
    (``queued.min.messages`` 1: librdkafka stops fetching it until that is
    read) and sits at each partition's end, where a fetch lists nothing.
    """

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]],
                 wait_s: float = 0.05, clock: Any = time.monotonic, hold: bool = True) -> None:
        from confluent_kafka import TopicPartition

        self._tps = [TopicPartition(t, p) for t, p in partitions]
        self._ends: dict[str, int] = {}
        self._wait_s, self._clock, self._hold = wait_s, clock, hold
        # hold=False (a query's latestOffset, on the micro-batches' critical path): read on
        # continuously, every end ~10 ms old, no waiting; at the broker's cost described above.
        held = {"queued.min.messages": 1, "fetch.queue.backoff.ms": 5} if hold else {}
        self._consumer = from_environment(bootstrap).consumer({
            "group.id": f"squall-hw-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "fetch.max.bytes": 1 << 20,
            "max.partition.fetch.bytes": 1 << 14, "fetch.wait.max.ms": 10, **held})
        self._consumer.assign([TopicPartition(t.topic, t.partition, 0) for t in self._tps])

    def poll(self) -> dict[str, int]:
        """``{"topic:partition": end}``, each as of the last fetch of its partition.

        A partition with nothing queued is fetched at its end in a loop: its watermark is
        fresh. One that holds a message stopped fetching when it arrived: it is drained,
        moved to its end and waited for (up to ``wait_s``), as is one not heard yet (without
        ``hold``, only those: the others were fetched a moment ago).
        """
        c = self._consumer
        held = self._heard_from(c.consume(10_000, 0))
        waiting = {edge_key(t, p) for t, p in held} if self._hold else set()
        waiting |= {edge_key(tp.topic, tp.partition) for tp in self._tps
                    if c.get_watermark_offsets(tp, cached=True)[1] in (None, -1001)}
        self._learn()
        deadline = self._clock() + self._wait_s
        while waiting:
            left = deadline - self._clock()
            if left <= 0:
                break
            waiting -= {edge_key(t, p) for t, p in self._heard_from(c.consume(10_000,
                                                                             min(left, 0.01)))}
        self._learn()
        return dict(self._ends)

    @staticmethod
    def _heard_from(msgs: list[Any]) -> set[tuple[str, int]]:
        out = set()
        for m in msgs:
            topic, part = m.topic(), m.partition()
            if m.error() is None and topic is not None and part is not None:
                out.add((topic, part))
        return out

    def _learn(self) -> None:
        """Take each end heard; fetch on from there (a fetch at the end lists nothing)."""
        from confluent_kafka import TopicPartition

        for tp in self._tps:
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high is not None and high >= 0:
                key = edge_key(tp.topic, tp.partition)
                if high > self._ends.get(key, 0):
                    self._ends[key] = high
                    self._consumer.seek(TopicPartition(tp.topic, tp.partition, high))

    def close(self) -> None:
        self._consumer.close()


def range_batch(task: int, ranges: list[tuple[str, int, int, int]]) -> pa.RecordBatch:
    """A task's ranges as the rows ``read`` yields (the columns of :data:`SCHEMA`).

    Arrow is imported here, not with the module: Spark's planner process that
    instantiates the source (``create_data_source``) imports this module and nothing
    else of ours, and does not need Arrow (~0.12 s of a bolts job's first planning)."""
    import pyarrow as pa

    topics, parts, starts, ends = (list(c) for c in zip(*ranges, strict=True)) if ranges \
        else ([], [], [], [])
    return pa.RecordBatch.from_arrays(
        [pa.array([task] * len(ranges), pa.int32()), pa.array(topics, pa.string()),
         pa.array(parts, pa.int32()), pa.array(starts, pa.int64()),
         pa.array(ends, pa.int64())], names=["task", "topic", "partition", "start", "end"])
