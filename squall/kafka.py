"""Small confluent-kafka helpers shared by the services, the dev stack and the tests."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from squall.core.control.kafka_acls import Operation, refusal
from squall.core.errors import KafkaUnavailable
from squall.kafka_clients import KafkaClients, quiet_logger

log = logging.getLogger("squall.kafka")


#: A produce blocked this long on a full local queue is logged (then every as long again):
#: a silent wait hid a bolt task stuck for minutes behind a slow broker.
BLOCKED_WARN_S = 5.0


def produce(producer: Any, topic: str, value: bytes | None,
            clock: Callable[[], float] = time.monotonic, **kw: Any) -> None:
    """Produce, waiting for deliveries to drain while the local queue is full."""
    started: float | None = None
    warned: float | None = None
    while True:
        try:
            producer.produce(topic, value, **kw)
            if warned is not None and started is not None:
                log.warning("produce to %s went through after %.1f s", topic, clock() - started)
            return
        except BufferError:
            now = clock()
            started = now if started is None else started
            if now - (started if warned is None else warned) >= BLOCKED_WARN_S:
                warned = now
                log.warning("produce to %s blocked for %.1f s: the local queue is full (%d "
                            "messages waiting for the broker)", topic, now - started,
                            len(producer))
            producer.poll(0.05)


def consume_ready(consumer: Any, max_messages: int, timeout_s: float) -> list[Any]:
    """Up to ``max_messages`` the consumer holds already; with none, waits up to
    ``timeout_s`` for the first and returns it with those that came along.

    ``Consumer.consume(n, timeout)`` returns only once it has ``n`` messages or the
    timeout passed: a loop that asks for many waits out its whole timeout on every pass
    below full rate, and each tree's round trip with it."""
    got: list[Any] = consumer.consume(max_messages, 0)
    if got or timeout_s <= 0:
        return got
    first = consumer.poll(timeout_s)
    if first is None:
        return []
    return [first, *consumer.consume(max_messages - 1, 0)] if max_messages > 1 else [first]


def unread(consumer: Any, msgs: list[Any]) -> None:
    """Seek ``consumer`` back to the first of ``msgs`` in each partition: they are read
    again (a loop that must not act on them now, its lease run out)."""
    from confluent_kafka import TopicPartition

    first: dict[tuple[str, int], int] = {}
    for m in msgs:
        if not m.error():
            tp = (m.topic(), m.partition())
            first[tp] = min(first.get(tp, m.offset()), m.offset())
    for (t, p), off in first.items():
        consumer.seek(TopicPartition(t, p, off))


#: The acker's and the spout's fetch wait (``fetch.wait.max.ms``). A fetch parked at the
#: log's end returns as soon as records come, so the wait costs nothing under load; it
#: bounds how often an idle consumer asks (librdkafka's 500 ms default halved the spout's
#: throughput at max spout pending, where it waits on its results alone).
FETCH_WAIT_MS = 100


def ensure_topics(clients: KafkaClients, topics: Mapping[str, int],
                  timeout_s: float = 10.0, quiet: bool = False) -> None:
    """Create those of ``{topic: partitions}`` that do not exist, with the replication factor
    and configs of the user's properties (default: the brokers' ``default.replication.factor``
    and ``min.insync.replicas``, as Kafka Streams does). Topics that exist are used as they
    are and need no Create ACL.

    Not a count of the brokers the metadata shows: a cluster still starting, or with a
    broker down, would get topics with fewer replicas for good. Kafka places replicas on
    every registered broker, a stopped one too (it catches up once back), and refuses a
    creation only while fewer are registered (INVALID_REPLICATION_FACTOR); the error names
    the topic."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined,unused-ignore]

    conf: dict[str, Any] = {"socket.timeout.ms": 3000}
    if quiet:
        conf["logger"] = quiet_logger("admin")
    md = clients.metadata(timeout_s)
    missing = {t: n for t, n in topics.items()
               if t not in md.topics or md.topics[t].error is not None}
    if not missing:
        return
    admin = clients.admin(conf)
    replication = clients.properties.replication_factor
    configs = clients.properties.topic_config()
    futures = admin.create_topics(
        [NewTopic(t, n, -1 if replication is None else replication, config=configs)
         for t, n in missing.items()],
        operation_timeout=timeout_s, request_timeout=timeout_s)
    rf = "-1 (the brokers' default.replication.factor)" if replication is None else replication
    for topic, fut in futures.items():
        try:
            fut.result(timeout=timeout_s)
        except Exception as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            denied = isinstance(err, KafkaError) and refusal(
                err.name(), Operation.CREATE, topic, "creating the topics it uses")
            if denied:
                raise denied from None
            raise KafkaUnavailable(
                f"could not create topic {topic!r} on {clients.bootstrap} (replication.factor="
                f"{rf}{''.join(f', topic.{k}={v}' for k, v in configs.items())}): {e}") from e
    shown = _await_visible(clients, missing, timeout_s)
    thin = sorted(t for t in missing
                  if any(len(p.replicas) < 2 for p in shown.topics[t].partitions.values()))
    if replication is None and thin and len(shown.brokers) > 1:
        log.warning("created %s with a single replica on a cluster of %d brokers (their "
                    "default.replication.factor): a broker's loss loses what it holds; set "
                    "default.replication.factor on the brokers, or replication.factor in "
                    "Squall's Kafka properties (docs/kafka.md)", thin, len(shown.brokers))


def _await_visible(clients: KafkaClients, topics: Mapping[str, int], timeout_s: float) -> Any:
    """Wait until the brokers' metadata shows every partition of ``topics`` with a leader:
    a topic's creation is confirmed by the controller before the brokers know of it, and
    a client that asks at once sees no partitions. The metadata that shows them."""
    deadline = time.monotonic() + timeout_s
    while True:
        md = clients.metadata(timeout_s)
        short = {t: n for t, n in topics.items()
                 if t not in md.topics or md.topics[t].error is not None
                 or sum(p.leader >= 0 for p in md.topics[t].partitions.values()) < n}
        if not short:
            return md
        if time.monotonic() >= deadline:
            raise KafkaUnavailable(
                f"topics {sorted(short)} created on {clients.bootstrap} but not shown with "
                f"a leader for each partition within {timeout_s:.0f} s")
        time.sleep(0.1)


def check_refused(err: Any, operation: Operation, name: str, doing: str) -> None:
    """Raise :class:`NotAuthorized` if ``err`` (a ``KafkaError`` or None) is a broker's
    refusal of ``operation`` on ``name``: a missing ACL never heals by retrying."""
    denied = refusal(err.name(), operation, name, doing) if err is not None else None
    if denied is not None:
        raise denied


def group_offsets(kafka: KafkaClients, group: str, topics: Iterable[str],
                  timeout_s: float = 15.0) -> dict[str, dict[int, int]]:
    """Where consumer group ``group`` committed, per topic and partition (those it
    committed in only)."""
    from confluent_kafka import KafkaException, TopicPartition

    c = kafka.consumer({"group.id": group, "enable.auto.commit": False,
                        "logger": quiet_logger("offsets")})
    try:
        md = c.list_topics(timeout=timeout_s)
        tps = [TopicPartition(t, p) for t in topics if t in md.topics
               for p in md.topics[t].partitions]
        out: dict[str, dict[int, int]] = {}
        for tp in c.committed(tps, timeout=timeout_s) if tps else ():
            if tp.offset >= 0:
                out.setdefault(tp.topic, {})[tp.partition] = tp.offset
        return out
    except KafkaException as e:
        raise KafkaUnavailable(f"cannot read the offsets of group {group!r} on "
                               f"{kafka.bootstrap}: {e}") from None
    finally:
        c.close()


def commit_group_offsets(kafka: KafkaClients, group: str,
                         offsets: Iterable[tuple[str, int, int]], timeout_s: float = 15.0
                         ) -> None:
    """Commit ``(topic, partition, offset)`` for consumer group ``group`` (one that has no
    member yet: where it will start)."""
    from confluent_kafka import KafkaException, TopicPartition

    at = [TopicPartition(t, p, o) for t, p, o in offsets]
    if not at:
        return
    c = kafka.consumer({"group.id": group, "enable.auto.commit": False,
                        "socket.timeout.ms": int(timeout_s * 1000),
                        "logger": quiet_logger("offsets")})
    try:
        c.commit(offsets=at, asynchronous=False)
    except KafkaException as e:
        raise KafkaUnavailable(f"cannot commit the start offsets of group {group!r} on "
                               f"{kafka.bootstrap}: {e}") from None
    finally:
        c.close()


def end_offset(kafka: KafkaClients, topic: str, partition: int, timeout_s: float = 10.0) -> int:
    """An offset at or before the partition's end (where the next record will land, or
    before it: a broker may report the end short of its last batch)."""
    from confluent_kafka import TopicPartition

    c = kafka.consumer({"group.id": "squall-end-offset", "enable.auto.commit": False,
                        "logger": quiet_logger("end-offset")})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, partition), timeout_s)[1])
    finally:
        c.close()


def scan(consumer: Any, starts: Mapping[tuple[str, int], int],
         timeout_s: float = 10.0, stops: Mapping[tuple[str, int], int] | None = None
         ) -> Iterator[Any]:
    """Every record from ``starts`` to the partitions' ends (or, with ``stops``, up to
    those offsets, excluded), through ``consumer`` (assigned here, unassigned after), for
    six timeouts at most; a broker may report an end short of its last batch, so without
    ``stops`` it reads on to a quiet poll."""
    from confluent_kafka import TopicPartition

    ends = {k: consumer.get_watermark_offsets(TopicPartition(*k), timeout_s)[1] for k in starts}
    if stops is not None:
        ends = {k: min(e, stops.get(k, e)) for k, e in ends.items()}
    consumer.assign([TopicPartition(t, p, o) for (t, p), o in starts.items()])
    at: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + 6 * timeout_s
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(1000, 0.5)
            for m in msgs:
                k, offset = (m.topic() or "", m.partition() or 0), m.offset() or 0
                if m.error():
                    continue
                at[k] = max(at.get(k, 0), offset + 1)
                if offset < ends.get(k, offset + 1) or stops is None:
                    yield m
            if stops is not None and not msgs:  # past markers the records do not show
                for tp in consumer.position([TopicPartition(t, p) for t, p in ends]):
                    at[(tp.topic, tp.partition)] = max(at.get((tp.topic, tp.partition), 0),
                                                       tp.offset)
            if (not msgs or stops is not None) and \
                    all(at.get(k, starts[k]) >= e for k, e in ends.items()):
                return
    finally:
        consumer.unassign()


def find_by_header(consumer: Any, starts: Mapping[tuple[str, int], int], header: str,
                   wanted: Iterable[str], timeout_s: float = 10.0) -> dict[str, int]:
    """Where the records whose ``header`` is one of ``wanted`` are, from ``starts`` on."""
    want = set(wanted)
    found: dict[str, int] = {}
    for m in scan(consumer, starts, timeout_s):
        for k, v in m.headers() or []:
            if k == header and v is not None and v.decode(errors="replace") in want:
                found[v.decode()] = m.offset() or 0
    return found
