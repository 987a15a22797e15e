"""The Kafka sink (storm-kafka-client's ``KafkaBolt``): what a spec says of it, checked at
submit, and what each input tuple becomes (pure: no Kafka here).

A bolt of class :data:`KAFKA_BOLT` writes each input tuple to a topic and acks it once
Kafka confirmed the write, so its tree completes only when the output is durable. Its
configuration (``config:`` in a spec; the builder's ``kafka_bolt``):

- ``topic``: the topic (Storm's ``DefaultTopicSelector``), and/or ``topic.field``: a field
  naming each tuple's topic (``FieldNameTopicSelector``; ``topic`` when it is empty);
- ``key.field`` / ``message.field``: the fields of the record's key and value (Storm's
  ``FieldNameBasedTupleToKafkaMapper``, defaults ``key`` and ``message``; without a
  ``key`` field the key is null). Bytes go as they are, text as UTF-8, anything else as
  JSON;
- ``exactly.once``: write each output once to the topic, whatever is replayed (below);
- ``producer``: librdkafka properties tuning the sink's own producer
  (:data:`PRODUCER_TUNING`: batching, compression, timeouts). Where it connects, as whom and
  how securely come from the environment (docs/kafka.md), never from a spec: a spec naming
  its own brokers would be handed the environment's credentials.

Every record carries the header ``squall.id``: the input tuple's place in its source
message's tree (its component, stream, source partition and offset, and path), the same
on every replay of that message. A keyed record goes to the partition Kafka's Java client
would pick (murmur2 of the key); an unkeyed one, in exactly-once mode, to one chosen from
its id, so each output has one partition where it can be.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from squall.core.errors import TopologyError
from squall.core.reliability.tuples import Tuple
from squall.core.topology.checks import check_topic
from squall.core.topology.grouping import Grouping

#: The class a spec names for the sink (the bolts job runs it itself).
KAFKA_BOLT = "squall.kafka_bolt:KafkaBolt"
TOPIC, TOPIC_FIELD = "topic", "topic.field"
KEY_FIELD, MESSAGE_FIELD = "key.field", "message.field"
EXACTLY_ONCE, PRODUCER = "exactly.once", "producer"
KEYS = (TOPIC, TOPIC_FIELD, KEY_FIELD, MESSAGE_FIELD, EXACTLY_ONCE, PRODUCER)
#: What a spec may set of the sink's producer.
PRODUCER_TUNING = frozenset({
    "linger.ms", "queue.buffering.max.ms", "batch.size", "batch.num.messages",
    "compression.type", "compression.codec", "compression.level", "message.max.bytes",
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "message.timeout.ms",
    "delivery.timeout.ms", "request.timeout.ms", "retries", "message.send.max.retries",
    "retry.backoff.ms", "retry.backoff.max.ms", "max.in.flight.requests.per.connection",
    "max.in.flight", "sticky.partitioning.linger.ms", "client.id"})
#: The header naming an output (its input's place in its message's tree).
ID_HEADER = "squall.id"
#: Groupings that send a replayed tuple to the task its first copy went to.
STICKY = (Grouping.FIELDS, Grouping.GLOBAL)


@dataclass(frozen=True)
class SinkSpec:
    topic: str | None = None
    topic_field: str | None = None
    key_field: str = "key"
    message_field: str = "message"
    exactly_once: bool = False
    producer: Mapping[str, Any] = field(default_factory=dict)

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {KEY_FIELD: self.key_field, MESSAGE_FIELD: self.message_field}
        if self.topic is not None:
            out[TOPIC] = self.topic
        if self.topic_field is not None:
            out[TOPIC_FIELD] = self.topic_field
        if self.exactly_once:
            out[EXACTLY_ONCE] = True
        if self.producer:
            out[PRODUCER] = dict(self.producer)
        return out


def sink_of(config: Mapping[str, Any], where: str) -> SinkSpec:
    """The sink a Kafka bolt's configuration gives, or a TopologyError naming the key."""
    unknown = sorted(set(config) - set(KEYS))
    if unknown:
        raise TopologyError(f"{where}: a Kafka bolt takes no {unknown} (it takes "
                            f"{', '.join(KEYS)})")
    names: dict[str, str | None] = {}
    for key in (TOPIC, TOPIC_FIELD, KEY_FIELD, MESSAGE_FIELD):
        v = config.get(key)
        if v is not None and (not isinstance(v, str) or not v):
            raise TopologyError(f"{where}: {key} must be a non-empty string, got {v!r}")
        names[key] = v
    if names[TOPIC] is None and names[TOPIC_FIELD] is None:
        raise TopologyError(f"{where}: a Kafka bolt needs {TOPIC} or {TOPIC_FIELD}")
    topic = names[TOPIC]
    if topic is not None:
        check_topic(topic, where)
    once = config.get(EXACTLY_ONCE, False)
    if not isinstance(once, bool):
        raise TopologyError(f"{where}: {EXACTLY_ONCE} must be true or false, got {once!r}")
    props = config.get(PRODUCER, {})
    if not isinstance(props, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in
            props.items()):
        raise TopologyError(f"{where}: {PRODUCER} must map librdkafka property names to "
                            f"strings, numbers or booleans (values not shown)")
    refused = sorted(set(props) - PRODUCER_TUNING)
    if refused:
        raise TopologyError(f"{where}: {PRODUCER} may not set {refused}: a spec tunes the "
                            f"producer ({', '.join(sorted(PRODUCER_TUNING))}); where it "
                            "connects and as whom come from the environment (SQUALL_KAFKA_*)")
    return SinkSpec(topic, names[TOPIC_FIELD], names[KEY_FIELD] or "key",
                    names[MESSAGE_FIELD] or "message", once, dict(props))


def check_sink(s: SinkSpec, config: Mapping[str, Any],
               inputs: Sequence[tuple[str, Grouping, Sequence[str]]], parallelism: int,
               where: str) -> None:
    """The sink in its topology: every input has the fields it reads; in exactly-once mode
    each input is routed so a replayed tuple comes to the task its first copy went to
    (which alone then decides whether it was written)."""
    for name, grouping, fields in inputs:
        wanted = [s.message_field, *([s.topic_field] if s.topic_field else []),
                  *([s.key_field] if KEY_FIELD in config else [])]
        missing = [f for f in wanted if f not in fields]
        if missing:
            raise TopologyError(f"{where}: input {name} has no fields {missing}; it has "
                                f"{list(fields)}")
        if s.exactly_once and parallelism > 1 and grouping not in STICKY:
            raise TopologyError(
                f"{where}: an exactly-once Kafka bolt with {parallelism} tasks needs its "
                f"inputs fields- or global-grouped (input {name} is {grouping.value}), so a "
                "replayed tuple comes back to the task that wrote it")


@dataclass(frozen=True, slots=True)
class SinkRecord:
    """What one input tuple becomes: where it goes (partition None: any), and its id."""

    topic: str
    key: bytes | None
    value: bytes | None
    id: str | None


def record_of(s: SinkSpec, t: Tuple) -> SinkRecord:
    """``t`` as a record; a ValueError says what cannot be written."""
    topic = s.topic
    if s.topic_field is not None:
        named = t[s.topic_field]
        if named not in (None, ""):
            if not isinstance(named, str):
                raise ValueError(f"field {s.topic_field!r} names topic {named!r}, not a string")
            topic = named
    if topic is None:
        raise ValueError(f"field {s.topic_field!r} is empty and no default {TOPIC} is set")
    key = encoded(t[s.key_field]) if s.key_field in t.fields else None
    return SinkRecord(topic, key, encoded(t[s.message_field]), output_id(t))


def output_id(t: Tuple) -> str | None:
    """The tuple's place in its source message's tree, the same on every replay (None: its
    message is not known)."""
    if t.origin is None:
        return None
    source, offset = t.origin
    return f"{t.source}/{t.stream}/{source}@{offset}/{t.path:016x}"


def encoded(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    try:
        return json.dumps(v, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as e:
        raise ValueError(f"{type(v).__name__} value {v!r} cannot be written: {e}") from None


def murmur2_partition(key: bytes, partitions: int) -> int:
    """The partition Kafka's Java client (and librdkafka's ``murmur2`` partitioner) picks
    for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``, as a signed 32-bit int."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    n4 = len(data) // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[4 * n4:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h
