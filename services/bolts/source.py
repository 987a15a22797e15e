"""A Python streaming data source over a bolt's edge topics (``format("squall_edges")``).

The source plans; the bolt tasks read. Offsets are ``{"topic:partition": offset}``;
one input partition per bolt task covers partition ``task`` of every input topic, so
one task's tuples stay together, and its rows are only the ranges to read: ``(task,
topic, partition, start, end)``. The task reads them from Kafka itself
(:func:`read_task_input`, confluent-kafka: PySpark ships no Kafka connector jar), so
the tuples never pass through the JVM (an Arrow hand-off to the JVM, a conversion to
rows and back, and a second Python worker per task cost more than the bolts did).
``max_rows`` bounds a micro-batch (Kafka messages, each a batch of tuples). The end of
a partition is learnt from the high watermark of a fetch response, which every broker
gets right (ListOffsets, not always: docs/kafka.md).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from services.bolts import clients
from squall.core.contiguity import Contiguity
from squall.core.linger import Linger
from squall.kafka import GAP_HOLD_MS, log_gaps, log_overdue, paced_fetches
from squall.kafka_clients import from_environment

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = "task int, topic string, partition int, start long, end long"
#: A range read that brings nothing for this long is retried: re-positioned, with backoff.
STALL_S = 1.0
MAX_BACKOFF_S = 5.0
#: How often a lingering offer looks at the edges' ends again.
LINGER_POLL_S = 0.005

log = logging.getLogger("squall.bolts.source")


def _key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def next_offsets(start: Mapping[str, int], ends: Mapping[str, int], budget: int | None
                 ) -> dict[str, int]:
    """The next micro-batch's end: up to the edges' ``ends``, at most ``budget`` records
    in all (None: no limit) shared over the partitions with data, round robin, so none
    starves."""
    out = dict(start)
    if budget is None:
        out.update({k: max(v, ends.get(k, v)) for k, v in start.items()})
        return out
    waiting = {k: ends.get(k, v) - v for k, v in start.items() if ends.get(k, v) > v}
    while budget > 0 and waiting:
        share = max(1, budget // len(waiting))
        for k in list(waiting):
            take = min(share, waiting[k], budget)
            out[k] += take
            waiting[k] -= take
            budget -= take
            if not waiting[k]:
                del waiting[k]
            if budget <= 0:
                break
    return out


@dataclass
class TaskPartition(InputPartition):
    """One bolt task's ranges of a micro-batch (``read`` gets a pickled copy)."""

    task: int
    ranges: list[tuple[str, int, int, int]]  # topic, partition, start, end (exclusive)


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

    def initialOffset(self) -> dict[str, int]:
        # Deterministic (it is called again when batch 0 is replayed): the topic start.
        return {_key(t, p): 0 for t in self.topics for p in self.tasks}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows)

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        ends = self._high_watermarks()
        # After an idle spell, wait for the burst to land (squall/core/linger.py).
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

    The high watermark each fetch response carries is right on every broker
    (ListOffsets is not: docs/kafka.md). The data itself is not wanted, and
    fetching it is what costs: a consumer reading an edge continuously (100
    fetches a second) reads every edge record twice, and on a broker that charges
    each fetch for every batch a partition ever held, more each minute. So the
    consumer holds at most one fetched message per partition
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
        held = paced_fetches(5) if hold else {}
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
        waiting = {_key(t, p) for t, p in held} if self._hold else set()
        waiting |= {_key(tp.topic, tp.partition) for tp in self._tps
                    if c.get_watermark_offsets(tp, cached=True)[1] in (None, -1001)}
        self._learn()
        deadline = self._clock() + self._wait_s
        while waiting:
            left = deadline - self._clock()
            if left <= 0:
                break
            waiting -= {_key(t, p) for t, p in self._heard_from(c.consume(10_000,
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
                key = _key(tp.topic, tp.partition)
                if high > self._ends.get(key, 0):
                    self._ends[key] = high
                    self._consumer.seek(TopicPartition(tp.topic, tp.partition, high))

    def close(self) -> None:
        self._consumer.close()


@dataclass
class RangeRead:
    offsets: list[int]
    values: list[bytes | None]
    retries: int = 0
    #: the range's records are gone from the broker (deleted, or a broker that lost them)
    lost: int = 0


def read_range(c: Any, topic: str, p: int, start: int, end: int,
               stall_s: float = STALL_S, clock: Any = time.monotonic,
               sleep: Any = time.sleep, gap_hold_ms: int = GAP_HOLD_MS) -> RangeRead:
    """Every record of ``topic[p]`` in ``[start, end)``: the range is known to be there.

    An empty or short answer is never taken for the end of the data: a fetch
    that brings nothing for ``stall_s`` is retried (re-positioned at the next
    offset, with backoff up to ``MAX_BACKOFF_S``), logged and counted, for as
    long as it takes. A gap in the offsets is fetched again until it fills or
    ``gap_hold_ms`` passed (squall/core/contiguity.py: a broker may show a batch
    before an earlier one). Only the broker saying the offsets no longer exist
    ends a read early: those tuples' trees then time out and are replayed from
    the source, so nothing is lost.
    """
    from confluent_kafka import KafkaError, TopicPartition

    out = RangeRead([], [])
    key = (topic, p)
    gaps = Contiguity[tuple[str, int]](gap_hold_ms)
    gaps.expect(key, start)
    nxt = start
    backoff = 0.05
    c.assign([TopicPartition(topic, p, start)])
    last = clock()
    try:
        while nxt < end:
            data = []
            for m in c.consume(min(1000, end - nxt), 0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError.OFFSET_OUT_OF_RANGE:
                        out.lost = end - nxt
                        log.error("%s[%d]: offsets %d..%d are gone from the broker (%s); their "
                                  "trees will time out and be replayed from the source",
                                  topic, p, nxt, end - 1, err)
                        return out
                    continue
                off = m.offset()
                if off is not None and off < end:
                    data.append(m)
            got = gaps.admit(key, [m.offset() for m in data], int(clock() * 1000))
            for m in data[got.start:got.stop]:
                out.offsets.append(m.offset())
                out.values.append(m.value())
            log_gaps(key, got, gap_hold_ms,
                     data[got.stop].offset() if got.rewind_to is not None else None)
            for first, present in gaps.overdue(int(clock() * 1000)).values():
                log_overdue(key, first, present, gap_hold_ms)
                c.assign([TopicPartition(topic, p, present)])
            nxt = gaps.next_offset(key) or nxt
            if got.rewind_to is not None:  # fetch again from the gap (assign: always valid)
                c.assign([TopicPartition(topic, p, got.rewind_to)])
                continue
            if got.stop > got.start:
                last, backoff = clock(), 0.05
                continue
            # Offsets without a record (transaction markers, compaction) end a range too,
            # once they stayed missing as long as a gap must.
            pos = c.position([TopicPartition(topic, p)])[0].offset
            if pos is not None and pos > nxt:
                if gaps.passed(key, pos, int(clock() * 1000)):
                    nxt = pos
                continue
            if clock() - last < stall_s:
                continue
            out.retries += 1
            log.warning("%s[%d]: no record for %.1f s at offset %d (range %d..%d, retry %d); "
                        "re-positioning in %.2f s", topic, p, clock() - last, nxt, start,
                        end - 1, out.retries, backoff)
            sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            c.unassign()
            c.assign([TopicPartition(topic, p, nxt)])
            last = clock()
    finally:
        c.unassign()
    return out


def plan_partitions(topics: Sequence[str], tasks: Sequence[int], start: Mapping[str, int],
                    end: Mapping[str, int]) -> list[TaskPartition]:
    """A micro-batch from ``start`` to ``end``: per task with data, its ranges."""
    parts = []
    for task in tasks:
        ranges = [(t, task, start.get(_key(t, task), 0), end.get(_key(t, task), 0))
                  for t in topics if end.get(_key(t, task), 0) > start.get(_key(t, task), 0)]
        if ranges:
            parts.append(TaskPartition(task, ranges))
    return parts


def logged_partitions(checkpoint: Path, batch_id: int, topics: Sequence[str],
                      tasks: Sequence[int]) -> list[TaskPartition] | None:
    """Micro-batch ``batch_id``'s partitions as Spark's offset log has them (the log is
    written before the batch runs, and a batch run again after a crash reads the same
    entries): its end is the batch's entry, its start the previous batch's (or the topic
    start). None if the log cannot be read here (a checkpoint on another file system):
    the caller reads the batch through the source instead."""
    def entry(bid: int) -> dict[str, int] | None:
        try:
            lines = (checkpoint / "offsets" / str(bid)).read_text().splitlines()
            doc = json.loads(lines[2])  # "v1", the batch's metadata, then our one source
        except (OSError, IndexError, ValueError):
            return None
        if not isinstance(doc, dict) or not all(isinstance(v, int) for v in doc.values()):
            return None
        return {str(k): int(v) for k, v in doc.items()}

    end = entry(batch_id)
    start = {} if batch_id == 0 else entry(batch_id - 1)
    if end is None or start is None:
        return None
    return plan_partitions(topics, tasks, start, end)


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


@dataclass
class TaskInput:
    """One bolt task's micro-batch: its ranges' records in order, ``(topic, partition,
    offset, value)``; the fetch retries it took, and how many records the broker no
    longer had."""

    task: int
    records: list[tuple[str, int, int, bytes | None]]
    retries: int = 0
    lost: int = 0


def read_task_input(bootstrap: str, batches: Iterable[pa.RecordBatch]) -> TaskInput:
    """Read the ranges of a task's micro-batch partition (the rows ``read`` yielded)."""
    rows = [r for rb in batches for r in rb.to_pylist()]
    out = TaskInput(int(rows[0]["task"]) if rows else -1, [])
    if not rows:
        return out
    c = clients.edge_consumer(bootstrap)
    for r in rows:
        topic, p = str(r["topic"]), int(r["partition"])
        got = read_range(c, topic, p, int(r["start"]), int(r["end"]))
        out.retries += got.retries
        out.lost += got.lost
        out.records += [(topic, p, o, v) for o, v in zip(got.offsets, got.values, strict=True)]
    return out
