"""The edge reader's range loop: an empty or short answer is retried, never taken for the end.

A scripted consumer stands in for Kafka here (the loop's decisions are what is
tested); tests/integration/test_edge_source.py reads real ranges from Apache Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError

from services.bolts.edges import read_range
from services.bolts.kafka_fence import MARKER, ExecutorFence, KafkaCutOff
from services.bolts.source import SCHEMA, range_batch

#: :data:`SCHEMA` (Spark's DDL), as Arrow.
ARROW_SCHEMA = pa.schema([("task", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
                          ("start", pa.int64()), ("end", pa.int64())])


@dataclass
class Msg:
    off: int
    code: int | None = None

    def error(self) -> Any:
        return None if self.code is None else KafkaError(self.code)

    def offset(self) -> int:
        return self.off

    def value(self) -> bytes:
        return f"v{self.off}".encode()


@dataclass
class Scripted:
    """Answers each consume with the next scripted list; then with nothing."""

    answers: list[list[Msg]]
    assigned: list[int] = field(default_factory=list)
    #: the consumer's position once the answers ran out (-1001: Kafka's "not known")
    end_position: int = -1001
    #: metadata requests made (one per retry: the leader may have moved)
    lookups: int = 0

    def assign(self, tps: list[Any]) -> None:
        self.assigned.append(tps[0].offset)

    def unassign(self) -> None:
        pass

    def list_topics(self, topic: str, timeout: float) -> None:
        self.lookups += 1

    def consume(self, n: int, timeout: float) -> list[Msg]:
        return self.answers.pop(0) if self.answers else []

    def position(self, tps: list[Any]) -> list[Any]:
        return [type("TP", (), {"offset": -1001 if self.answers else self.end_position})()]


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 0.5  # each look at the clock: one half-second poll went by
        return self.t


def test_empty_answers_are_retried_with_backoff_until_the_range_is_read() -> None:
    c = Scripted([[Msg(10), Msg(11)]] + [[] for _ in range(12)] + [[Msg(12), Msg(13)]])
    slept: list[float] = []
    got = read_range(c, "t", 0, 10, 14, stall_s=1.0, clock=Clock(), sleep=slept.append)
    assert got.offsets == [10, 11, 12, 13]
    assert got.retries >= 2 and got.retries == len(slept)
    assert slept == sorted(slept) and slept[0] < slept[-1]  # backoff grows
    assert c.assigned[0] == 10 and set(c.assigned[1:]) == {12}  # re-positioned at the gap
    assert c.lookups == got.retries


def test_a_range_the_broker_no_longer_has_ends_the_read_and_says_so() -> None:
    c = Scripted([[Msg(5)], [Msg(0, KafkaError.OFFSET_OUT_OF_RANGE)]])
    got = read_range(c, "t", 0, 5, 9, clock=Clock(), sleep=lambda s: None)
    assert got.offsets == [5] and got.lost == 3


def test_a_tasks_ranges_are_typed_rows_even_when_empty() -> None:
    assert ", ".join(f"{f.name} {t}" for f, t in zip(
        ARROW_SCHEMA, ("int", "string", "int", "long", "long"), strict=True)) == SCHEMA
    empty = range_batch(1, [])
    assert empty.schema == ARROW_SCHEMA and empty.num_rows == 0
    full = range_batch(1, [("t", 1, 3, 9), ("u", 1, 0, 2)])
    assert full.schema == ARROW_SCHEMA
    assert pa.Table.from_batches([empty, full]).to_pylist() == [
        {"task": 1, "topic": "t", "partition": 1, "start": 3, "end": 9},
        {"task": 1, "topic": "u", "partition": 1, "start": 0, "end": 2}]


def test_offsets_without_a_record_are_passed_as_the_position_passes_them() -> None:
    # 11 was compacted away; 14 and 15 are transaction markers, never delivered.
    c = Scripted([[Msg(10), Msg(12), Msg(13)]], end_position=16)
    got = read_range(c, "t", 0, 10, 16, clock=Clock(), sleep=lambda s: None)
    assert got.offsets == [10, 12, 13] and got.retries == 0
    assert c.assigned == [10]  # never sent back to fetch the gaps again


class Probes:
    """A probe whose answers are scripted: True (acknowledged) or False (silence)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers, self.calls = answers, 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.answers.pop(0) if self.answers else False


def test_a_read_on_a_host_cut_off_from_kafka_gives_its_task_up_after_the_grace() -> None:
    clock = Clock()
    fence = ExecutorFence(Probes([]), grace_s=20.0, clock=clock)
    c = Scripted([[Msg(10)]])
    with pytest.raises(KafkaCutOff, match=f"{MARKER}.*t\\[0\\] at offset 11"):
        read_range(c, "t", 0, 10, 14, stall_s=1.0, clock=clock, sleep=lambda _s: None,
                   fence=fence)
    assert 20.0 <= clock.t < 30.0


def test_a_read_that_waits_on_a_kafka_that_answers_waits_as_long_as_it_takes() -> None:
    clock = Clock()
    fence = ExecutorFence(Probes([True] * 1000), grace_s=20.0, clock=clock)
    c = Scripted([[Msg(10)]] + [[] for _ in range(200)] + [[Msg(11), Msg(12), Msg(13)]])
    got = read_range(c, "t", 0, 10, 14, stall_s=1.0, clock=clock, sleep=lambda _s: None,
                     fence=fence)
    assert got.offsets == [10, 11, 12, 13] and clock.t > 60.0
