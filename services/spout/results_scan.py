"""At start-up: what a task's results partition says about the incarnations before it.

Read from the committed results position to the end: the roots the ackers reported
acked, the salts earlier incarnations marked (the newest few), and the offsets they
dead-lettered. :class:`~squall.core.tasks.spout_recovery.RestartRecovery` turns them into offsets
not to emit again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from squall.core.errors import WireFormatError
from squall.core.reliability.records import Outcome
from squall.core.wire.internal import decode_letter_marker, decode_results, decode_salt_marker
from squall.kafka import consume_ready
from squall.kafka_clients import KafkaClients

log = logging.getLogger("squall.spout")
#: Salts older than the newest few cannot have trees left in flight.
MAX_SALTS = 4


@dataclass
class ResultsScan:
    end: int
    acked: set[int] = field(default_factory=set)
    salts: list[int] = field(default_factory=list)
    #: (topic, partition, offset) dead-lettered.
    letters: set[tuple[str, int, int]] = field(default_factory=set)


def scan_results(kafka: KafkaClients, topic: str, task_id: int, start: int,
                 timeout_s: float = 60.0) -> ResultsScan:
    """Read ``topic[task_id]`` from ``start`` to its end (what was read, if slower than
    ``timeout_s``)."""
    from confluent_kafka import KafkaError, TopicPartition

    c = kafka.consumer({"group.id": "squall-scan",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, task_id, start)])
    out = ResultsScan(start)
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in consume_ready(c, 1000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        out.end = max(out.end, m.offset() or 0)
                        out.salts = out.salts[-MAX_SALTS:]
                        return out
                    continue
                out.end = (m.offset() or 0) + 1
                _note(out, m.value() or b"")
    finally:
        c.close()
    log.warning("results scan of task %d did not reach the end; recovered what it read",
                task_id)
    out.salts = out.salts[-MAX_SALTS:]
    return out


def _note(out: ResultsScan, raw: bytes) -> None:
    marked = decode_salt_marker(raw)
    if marked is not None:
        out.salts.append(marked)
        return
    letter = decode_letter_marker(raw)
    if letter is not None:
        out.letters.add(letter)
        return
    try:
        res = decode_results(raw)
    except WireFormatError:
        return  # not ours to judge here: the running spout logs bad batches
    out.acked.update(res.roots[res.outcomes == Outcome.ACKED].tolist())
