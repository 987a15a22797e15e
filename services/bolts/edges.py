"""Reading a bolt task's edge records: the ranges its micro-batch was planned
(services/bolts/planning.py), read from Kafka by the task itself (confluent-kafka:
PySpark ships no Kafka connector jar), so the tuples never pass through the JVM.

An empty or short fetch is never taken for the end of a range: only the broker saying
the offsets are gone ends one early (their trees then time out and are replayed)."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from services.bolts import clients
from services.bolts.kafka_fence import ExecutorFence, executor_fence
from services.bolts.planning import TaskPartition

#: A range read that brings nothing for this long is retried: re-positioned, with backoff.
STALL_S = 1.0
MAX_BACKOFF_S = 5.0
#: How long a stalled read waits for the partition's leader to be looked up.
METADATA_S = 2.0

log = logging.getLogger("squall.bolts.edges")


@dataclass
class RangeRead:
    offsets: list[int]
    values: list[bytes | None]
    retries: int = 0
    #: the range's records are gone from the broker (deleted, or a broker that lost them)
    lost: int = 0


def read_range(c: Any, topic: str, p: int, start: int, end: int,
               stall_s: float = STALL_S, clock: Any = time.monotonic,
               sleep: Any = time.sleep, fence: ExecutorFence | None = None) -> RangeRead:
    """Every record of ``topic[p]`` in ``[start, end)``: the range is known to be there.

    An empty or short answer is never taken for the end of the data: a fetch
    that brings nothing for ``stall_s`` is retried (re-positioned at the next
    offset, with backoff up to ``MAX_BACKOFF_S``), logged and counted, for as
    long as it takes, unless ``fence`` finds this process cut off from Kafka
    (services/bolts/kafka_fence.py). Offsets without a record (transaction markers, compaction) are
    passed as the consumer's position passes them. Only the broker saying the offsets no
    longer exist
    ends a read early: those tuples' trees then time out and are replayed from
    the source, so nothing is lost.
    """
    from confluent_kafka import KafkaError, KafkaException, TopicPartition

    out = RangeRead([], [])
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
            for m in data:
                out.offsets.append(m.offset())
                out.values.append(m.value())
            if data:
                nxt = data[-1].offset() + 1
                last, backoff = clock(), 0.05
                if fence is not None:
                    fence.answered()
                continue
            # Offsets without a record (transaction markers, compaction) end a range too.
            pos = c.position([TopicPartition(topic, p)])[0].offset
            if pos is not None and pos > nxt:
                nxt = pos
                continue
            if clock() - last < stall_s:
                continue
            if fence is not None:
                fence.waiting(f"{topic}[{p}] at offset {nxt}")
            # The partition's leader may have moved off a broker that went silent: ask
            # where it is now, rather than wait for the old connection to time out.
            with contextlib.suppress(KafkaException):
                c.list_topics(topic, timeout=METADATA_S)
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


@dataclass
class TaskInput:
    """One bolt task's micro-batch: its ranges' records in order, ``(topic, partition,
    offset, value)``; the fetch retries it took, and how many records the broker no
    longer had."""

    task: int
    records: list[tuple[str, int, int, bytes | None]]
    retries: int = 0
    lost: int = 0


def read_task_input(bootstrap: str, part: TaskPartition) -> TaskInput:
    """Read a task's ranges of its micro-batch from Kafka, in order."""
    out = TaskInput(part.task, [])
    if not part.ranges:
        return out
    c = clients.edge_consumer(bootstrap)
    fence = executor_fence(bootstrap)
    for topic, p, start, end in part.ranges:
        got = read_range(c, topic, p, start, end, fence=fence)
        out.retries += got.retries
        out.lost += got.lost
        out.records += [(topic, p, o, v) for o, v in zip(got.offsets, got.values, strict=True)]
    return out
