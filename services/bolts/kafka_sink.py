"""A Kafka sink's task (squall/core/topology/kafka_sink.py): each input tuple written to its
topic, and acked only once Kafka confirmed the write; failed, with the broker's reason,
when it was not.

Exactly-once mode: before it writes, the task records each output's id in its state (the
state database, so it follows the task between Python workers), with where it goes
(:mod:`squall.core.tasks.sink_written`). An input whose id is recorded already (its
message replayed, or its micro-batch run again after a crash) is looked for in its
partition, from an offset known to precede it: found, it is acked without writing; not
found, written. Two copies of one id never race: a replay comes back to the task that
wrote it (the sink's inputs are fields- or global-grouped, checked at submit), and a
task's micro-batches run one at a time; the task holds its state's lock from the check
to the confirmation.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from services.bolts import clients
from services.bolts.task_state import TaskState
from squall.backends import open_kv
from squall.core.bolt_api.state import KeyValueState
from squall.core.errors import TopologyError
from squall.core.reliability.clock import Clock
from squall.core.reliability.records import AckerBatch
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.tasks.exec_result import ExecResult
from squall.core.tasks.sink_written import Intent, Written
from squall.core.topology.kafka_sink import (
    ID_HEADER,
    SinkRecord,
    murmur2_partition,
    record_of,
    sink_of,
)
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.wire.tuple_batch import TupleBatch
from squall.kafka import end_offset, find_by_header, produce
from squall.kafka_clients import from_environment

log = logging.getLogger("squall.bolts.sink")

#: How long a micro-batch waits for Kafka to confirm its writes before failing the rest.
CONFIRM_S = 30.0
#: How often the ids of committed source messages are let go.
FORGET_EVERY_S = 5.0
#: How long a topic's partition count is trusted.
METADATA_S = 60.0


class SinkTask:
    def __init__(self, spec: TopologySpec, bolt: BoltSpec, task: int, url: str,
                 bootstrap: str, clock: Clock, committed: Callable[[], dict[str, int]]) -> None:
        self.where = f"bolt {bolt.name!r} task {task}"
        self.sink = sink_of(bolt.config, f"bolt {bolt.name!r}")
        self.clock = clock
        self._committed = committed
        self._kafka = from_environment(bootstrap)
        self.producer = self._kafka.producer(
            {"linger.ms": 5, "enable.idempotence": True, **self.sink.producer}) \
            if self.sink.producer else clients.producer(bootstrap)
        self.kv: TaskState | None = None
        if self.sink.exactly_once:
            if not url:
                raise TopologyError(f"{self.where}: an exactly-once Kafka bolt records what it "
                                    "writes in the state database: start the bolts job with "
                                    "--state-url")
            self.kv = TaskState(open_kv(url, f"{spec.state_id}.{bolt.name}", task,
                                        bolt.parallelism), KeyValueState())
        self._anch = Anchoring()
        self._partitions: dict[str, tuple[float, int]] = {}
        self._last: dict[tuple[str, int], int] = {}  # offsets confirmed in this worker
        self._forgot = -math.inf
        self._reader: Any = None
        self._warned = False

    def run(self, batches: Sequence[TupleBatch]) -> ExecResult:
        tuples = [t for b in batches for t in b.tuples() if not t.is_tick]
        res = ExecResult(executed=len(tuples))
        out: list[tuple[int, SinkRecord, int | None]] = []
        for i, t in enumerate(tuples):
            try:
                rec = record_of(self.sink, t)
                out.append((i, rec, self._partition(rec)))
            except ValueError as e:
                self._fail(res, t, str(e))
        if self.kv is None:
            self._write(res, tuples, out)
        else:
            with self.kv.turn() as state:
                written = Written(state)
                out = self._unwritten(res, tuples, out, written)
                self.kv.save()  # the intents, before any write
                self._write(res, tuples, out)
                if time.monotonic() - self._forgot >= FORGET_EVERY_S:
                    self._forgot = time.monotonic()
                    written.forget_below(self._committed())
                self.kv.save()
        res.acks = AckerBatch.from_records(res.records, self.clock.now_ms()).coalesced()
        return res

    # ----- exactly once ------------------------------------------------------

    def _unwritten(self, res: ExecResult, tuples: Sequence[Tuple],
                   out: list[tuple[int, SinkRecord, int | None]], written: Written
                   ) -> list[tuple[int, SinkRecord, int | None]]:
        """The records to write: those recorded before and found in their partition are
        acked instead (as are second copies within the batch); the others are recorded."""
        recorded = written.recorded(r.id for _, r, _ in out if r.id is not None)
        found = self._look_for(recorded) if recorded else set()
        keep, seen = [], set()
        for i, rec, part in out:
            if rec.id is None:
                keep.append((i, rec, part))
                if not self._warned:
                    self._warned = True
                    log.warning("%s: tuples of unknown source messages are written at least "
                                "once, not exactly once", self.where)
                continue
            if rec.id in found or rec.id in seen:
                self._ack(res, tuples[i])
                continue
            seen.add(rec.id)
            origin = tuples[i].origin
            assert part is not None and origin is not None  # an id is its origin
            source, offset = origin
            written.record(rec.id, Intent(rec.topic, part, self._start(rec.topic, part),
                                          source, offset))
            keep.append((i, rec, part))
        return keep

    def _look_for(self, recorded: dict[str, Intent]) -> set[str]:
        """The ids among ``recorded`` that are in their partitions."""
        starts: dict[tuple[str, int], int] = {}
        for intent in recorded.values():
            key = (intent.topic, intent.partition)
            starts[key] = min(starts.get(key, intent.start), intent.start)
        found = set(find_by_header(self._consumer(), starts, ID_HEADER, recorded))
        log.info("%s: %d outputs recorded before, %d of them found in Kafka", self.where,
                 len(recorded), len(found))
        return found

    def _start(self, topic: str, part: int) -> int:
        """An offset of the partition at or before the next record written to it."""
        got = self._last.get((topic, part))
        if got is None:
            got = self._last[(topic, part)] = end_offset(self._kafka, topic, part)
        return got

    def _consumer(self) -> Any:
        """The task's reader of its partitions (assigned when it looks, never a group
        member)."""
        if self._reader is None:
            self._reader = self._kafka.consumer({
                "group.id": f"squall-sink-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        return self._reader

    # ----- writing -----------------------------------------------------------

    def _partition(self, rec: SinkRecord) -> int | None:
        """Where ``rec`` goes: by its key as Kafka's Java client would, or (exactly once,
        unkeyed) by its id; None: anywhere."""
        by = rec.key if rec.key is not None else \
            (rec.id.encode() if self.sink.exactly_once and rec.id is not None else None)
        if by is None:
            return None
        return murmur2_partition(by, self._count(rec.topic))

    def _count(self, topic: str) -> int:
        at, n = self._partitions.get(topic, (-math.inf, 0))
        if time.monotonic() - at < METADATA_S:
            return n
        md = self.producer.list_topics(topic, 10).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            raise ValueError(f"topic {topic!r} is not there to write to"
                             f"{f' ({md.error})' if md is not None and md.error else ''}")
        self._partitions[topic] = (time.monotonic(), len(md.partitions))
        return len(md.partitions)

    def _write(self, res: ExecResult, tuples: Sequence[Tuple],
               out: list[tuple[int, SinkRecord, int | None]]) -> None:
        """Write ``out``; ack each input Kafka confirmed, fail the others with why."""
        done: dict[int, Any] = {}

        def delivered(err: Any, msg: Any, i: int) -> None:
            done[i] = err if err is not None else (msg.topic(), msg.partition(), msg.offset())

        for i, rec, part in out:
            kw: dict[str, Any] = {"key": rec.key, "on_delivery": (
                lambda err, msg, i=i: delivered(err, msg, i))}
            if part is not None:
                kw["partition"] = part
            if rec.id is not None:
                kw["headers"] = [(ID_HEADER, rec.id.encode())]
            produce(self.producer, rec.topic, rec.value, **kw)
        left = self.producer.flush(CONFIRM_S) if out else 0
        for i, _, _ in out:
            got = done.get(i)
            if isinstance(got, tuple):
                self._last[(got[0], got[1])] = max(self._last.get((got[0], got[1]), 0), got[2])
                self._ack(res, tuples[i])
            else:
                self._fail(res, tuples[i], f"Kafka did not confirm the write: {got}" if got
                           else f"Kafka did not confirm the write in {CONFIRM_S:g} s "
                                f"({left} still waiting)")

    def _ack(self, res: ExecResult, t: Tuple) -> None:
        res.records += self._anch.ack(t)
        res.acked += 1

    def _fail(self, res: ExecResult, t: Tuple, why: str) -> None:
        res.records += self._anch.fail(t)
        res.failed += 1
        said = f"{self.where}: {why}"
        res.errors.append(said)
        for r in t.roots:
            res.reasons.setdefault(r, said)
