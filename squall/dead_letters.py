"""A topology's dead letters: listed by reason and time, shown one by one, and sent back into
the topology as fresh source messages, each at most once (the replays log:
squall/core/reliability/letter_replays.py). Used by the REST routes and ``squall
dead-letters``.

A spout's letter goes back to the partition it came from, with its key, its value and the
header ``squall.replay-of``; the spout then takes it as any new message (a message that
fails again is dead-lettered again, as a new letter). A bolt's letter (an edge record it
could not decode) is not a source message and is not replayed.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from squall.core.errors import NotFoundError, UsageError, WireFormatError
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.reliability.letter_replays import REPLAY_HEADER, Replay, Replays, replay_key
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import dlq_replays_topic, dlq_topic
from squall.kafka import end_offset, ensure_topics, find_by_header, scan
from squall.kafka_clients import KafkaClients, quiet_logger


@dataclass(frozen=True)
class Letter:
    dlq_offset: int
    time_ms: int
    #: why and from where (None: a record without Squall's headers)
    why: DeadLetterHeaders | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    def row(self, replays: Replays) -> dict[str, Any]:
        """What a listing shows of it."""
        w, done = self.why, replays.done(self.dlq_offset)
        return {"dlq_offset": self.dlq_offset, "time_ms": self.time_ms,
                "reason": w.reason if w else "", "attempts": w.attempts if w else 0,
                "component": w.component if w else "", "topic": w.topic if w else "",
                "partition": w.partition if w else -1, "offset": w.offset if w else -1,
                "size": len(self.value or b""),
                "replayed_to": None if done is None else
                f"{done.topic}[{done.partition}]@{done.offset}"}

    def detail(self, replays: Replays) -> dict[str, Any]:
        """All of it: the payload as text (if it is UTF-8) and as base64, every header."""
        try:
            text: str | None = (self.value or b"").decode()
        except UnicodeDecodeError:
            text = None
        return {**self.row(replays), "payload_text": text,
                "payload_base64": base64.b64encode(self.value or b"").decode(),
                "key_base64": None if self.key is None else base64.b64encode(self.key).decode(),
                "headers": {k: v.decode(errors="replace") for k, v in self.headers}}


@contextlib.contextmanager
def _reading(kafka: KafkaClients, topic: str, timeout_s: float
             ) -> Iterator[tuple[Any, list[int]] | None]:
    """A consumer of its own for reading ``topic``, and the topic's partitions (None if the
    topic does not exist)."""
    c = kafka.consumer({"group.id": f"squall-read-{time.monotonic_ns()}",
                        "enable.auto.commit": False, "auto.offset.reset": "earliest",
                        "logger": quiet_logger("dead-letters")})
    try:
        md = c.list_topics(topic, timeout_s).topics.get(topic)
        yield None if md is None or md.error is not None else (c, sorted(md.partitions))
    finally:
        c.close()


def read_all(kafka: KafkaClients, topic: str, timeout_s: float = 10.0) -> list[Any]:
    """Every record of ``topic`` (none if it does not exist), start to end."""
    with _reading(kafka, topic, timeout_s) as found:
        if found is None:
            return []
        c, parts = found
        return list(scan(c, {(topic, p): 0 for p in parts}, timeout_s))


#: The most letters one call reads: a listing and a bulk replay take the newest so many
#: (older ones through ``before``), a replay of chosen offsets at most so wide a span.
SCAN_LETTERS = 10_000


@dataclass(frozen=True)
class Window:
    """The offsets of the dead-letter topic a call read: ``first`` to ``end`` (excluded),
    and ``low``, the first the topic still keeps."""

    first: int
    end: int
    low: int


def _decoded(m: Any) -> Letter:
    headers = tuple((k, v or b"") for k, v in m.headers() or [])
    try:
        why: DeadLetterHeaders | None = DeadLetterHeaders.from_headers(list(headers))
    except WireFormatError:
        why = None
    return Letter(m.offset() or 0, m.timestamp()[1], why, m.key(), m.value(), headers)


def _read(kafka: KafkaClients, tid: str, first: int | None, end: int | None,
          timeout_s: float) -> tuple[list[Letter], Window]:
    """The letters from ``first`` (default: ``SCAN_LETTERS`` before ``end``) to ``end``
    (default: the newest), within what the topic keeps."""
    from confluent_kafka import TopicPartition

    topic = dlq_topic(tid)
    with _reading(kafka, topic, timeout_s) as found:
        if found is None:
            return [], Window(0, 0, 0)
        c = found[0]
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout_s)
        stop = high if end is None else max(low, min(end, high))
        start = max(low, stop - SCAN_LETTERS if first is None else first)
        if start >= stop:
            return [], Window(start, stop, low)
        got = [_decoded(m) for m in scan(c, {(topic, 0): start}, timeout_s, {(topic, 0): stop})]
        return got, Window(start, stop, low)


def letters(kafka: KafkaClients, tid: str, timeout_s: float = 10.0,
            before: int | None = None) -> tuple[list[Letter], Window]:
    """The newest ``SCAN_LETTERS`` letters (before the offset ``before``, if given)."""
    return _read(kafka, tid, None, before, timeout_s)


def letters_at(kafka: KafkaClients, tid: str, offsets: Iterable[int],
               timeout_s: float = 10.0) -> dict[int, Letter]:
    """The letters at ``offsets``, by offset (those that are not there left out); a set
    wider than ``SCAN_LETTERS`` offsets is refused."""
    wanted = set(offsets)
    if not wanted:
        return {}
    lo, hi = min(wanted), max(wanted)
    if hi - lo >= SCAN_LETTERS:
        raise UsageError(f"dead letters {lo} to {hi} span {hi - lo + 1} offsets: name at most "
                         f"{SCAN_LETTERS} offsets' span at once")
    got, _ = _read(kafka, tid, lo, hi + 1, timeout_s)
    return {lt.dlq_offset: lt for lt in got if lt.dlq_offset in wanted}


def replays(kafka: KafkaClients, tid: str, timeout_s: float = 10.0) -> Replays:
    out = Replays()
    for m in read_all(kafka, dlq_replays_topic(tid), timeout_s):
        try:
            out.add(Replay.decode(m.value() or b""))
        except WireFormatError:
            continue
    return out


def replay(kafka: KafkaClients, spec: TopologySpec, tid: str, chosen: Iterable[int],
           now_ms: int, timeout_s: float = 10.0, dry_run: bool = False
           ) -> dict[str, list[Any]]:
    """Send the letters at ``chosen`` (their offsets in the dead-letter topic) back to their
    source partitions, each at most once. ``{"replayed": [rows], "already": [rows],
    "refused": [{"dlq_offset", "why"}], "would_replay": [rows]}``: with ``dry_run`` nothing
    is sent, and ``would_replay`` lists what would have been."""
    chosen = sorted(set(chosen))
    by_offset = letters_at(kafka, tid, chosen, timeout_s)
    log = replays(kafka, tid, timeout_s)
    sources = {t for s in spec.spouts for t in s.topics}
    out: dict[str, list[Any]] = {"replayed": [], "already": [], "refused": [],
                                 "would_replay": []}
    todo: list[Letter] = []
    for n in chosen:
        lt = by_offset.get(n)
        if lt is None or lt.why is None:
            out["refused"].append({"dlq_offset": n, "why": "no such dead letter" if lt is None
                                   else "it has no source coordinates"})
        elif lt.why.topic not in sources:
            out["refused"].append({"dlq_offset": n, "why": f"a letter of {lt.why.component!r}"
                                   f" from {lt.why.topic!r}, not a source message"})
        elif log.done(n) is not None:
            out["already"].append(lt.row(log))
        else:
            todo.append(lt)
    if dry_run:
        out["would_replay"] = [lt.row(log) for lt in todo]
    if not todo or dry_run:
        return out
    ensure_topics(kafka, {dlq_replays_topic(tid): 1}, timeout_s)
    producer = kafka.producer({"enable.idempotence": True, "linger.ms": 5,
                               "logger": quiet_logger("dead-letters")})
    # an interrupted replay: was its message written?
    unsure = [u for lt in todo if (u := log.unsure(lt.dlq_offset)) is not None]
    written = _look_for(kafka, tid, unsure, timeout_s) if unsure else {}
    intents = []
    for lt in todo:
        if lt.dlq_offset in written:
            continue
        assert lt.why is not None
        intents.append(Replay(lt.dlq_offset, lt.why.topic, lt.why.partition,
                              end_offset(kafka, lt.why.topic, lt.why.partition, timeout_s),
                              time_ms=now_ms))
    _send(producer, dlq_replays_topic(tid), [r.encode() for r in intents], timeout_s)
    landed: dict[int, int] = dict(written)

    def delivered(err: Any, msg: Any, n: int) -> None:
        if err is None:
            landed[n] = msg.offset()

    for r in intents:
        lt = by_offset[r.letter]
        producer.produce(r.topic, lt.value, key=lt.key, partition=r.partition,
                         headers=[(REPLAY_HEADER, replay_key(tid, r.letter).encode())],
                         on_delivery=lambda err, msg, n=r.letter: delivered(err, msg, n))
    producer.flush(timeout_s)
    done = [Replay(lt.dlq_offset, lt.why.topic, lt.why.partition, 0, landed[lt.dlq_offset],
                   now_ms) for lt in todo if lt.why is not None and lt.dlq_offset in landed]
    _send(producer, dlq_replays_topic(tid), [r.encode() for r in done], timeout_s)
    for r in done:
        log.add(r)
    out["replayed"] = [by_offset[r.letter].row(log) for r in done]
    out["refused"] += [{"dlq_offset": lt.dlq_offset, "why": "Kafka did not confirm the write"}
                       for lt in todo if lt.dlq_offset not in landed]
    return out


def show(kafka: KafkaClients, tid: str, dlq_offset: int, timeout_s: float = 10.0
         ) -> dict[str, Any]:
    found = letters_at(kafka, tid, [dlq_offset], timeout_s).get(dlq_offset)
    if found is None:
        raise NotFoundError(f"topology {tid!r} has no dead letter at offset {dlq_offset}")
    return found.detail(replays(kafka, tid, timeout_s))


def listing(kafka: KafkaClients, tid: str, reason: str = "", since_ms: int = 0,
            limit: int = 100, timeout_s: float = 10.0, before: int | None = None
            ) -> dict[str, Any]:
    """Of the newest ``SCAN_LETTERS`` letters (before the offset ``before``, if given),
    those whose reason contains ``reason``, from ``since_ms``, newest first; how many there
    are by reason (its text up to the first colon); and the offsets read, with how many
    older letters were not."""
    log = replays(kafka, tid, timeout_s)
    got, window = letters(kafka, tid, timeout_s, before)
    rows = [lt.row(log) for lt in got]
    chosen = [r for r in rows if reason in r["reason"] and r["time_ms"] >= since_ms]
    by_reason: dict[str, int] = {}
    for r in chosen:
        kind = r["reason"].split(":")[0]
        by_reason[kind] = by_reason.get(kind, 0) + 1
    return {"total": len(chosen), "by_reason": by_reason,
            "letters": sorted(chosen, key=lambda r: -r["dlq_offset"])[:limit],
            "scanned_from": window.first, "scanned_to": window.end,
            "older": window.first - window.low}


def _look_for(kafka: KafkaClients, tid: str, unsure: Sequence[Replay], timeout_s: float
              ) -> dict[int, int]:
    """Which of the interrupted replays' messages are in their source partitions, and
    where."""
    starts: dict[tuple[str, int], int] = {}
    for r in unsure:
        k = (r.topic, r.partition)
        starts[k] = min(starts.get(k, r.start), r.start)
    c = kafka.consumer({"group.id": f"squall-replay-{time.monotonic_ns()}",
                        "enable.auto.commit": False, "auto.offset.reset": "earliest",
                        "logger": quiet_logger("dead-letters")})
    try:
        found = find_by_header(c, starts, REPLAY_HEADER,
                               [replay_key(tid, r.letter) for r in unsure], timeout_s)
    finally:
        c.close()
    return {int(k.rpartition(":")[2]): off for k, off in found.items()}


def _send(producer: Any, topic: str, values: Sequence[bytes], timeout_s: float) -> None:
    """Write ``values`` and wait for Kafka to confirm them all (else an error)."""
    from squall.core.errors import KafkaUnavailable

    failed: list[Any] = []
    for v in values:
        producer.produce(topic, v, partition=0,
                         on_delivery=lambda err, _m: failed.append(err) if err else None)
    left = producer.flush(timeout_s)
    if left or failed:
        raise KafkaUnavailable(f"the replays log {topic} did not take "
                               f"{left + len(failed)} records: {failed[:1]}")
