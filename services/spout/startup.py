"""A spout's start: its topics checked (and Squall's own made), where each source
partition starts, and how far its consumer reads ahead."""

from __future__ import annotations

import logging
from typing import Any

from services.spout.settings import SpoutSettings
from squall.core.control.kafka_acls import Operation
from squall.core.errors import ConfigError
from squall.kafka import check_refused, ensure_topics

log = logging.getLogger("squall.spout")


def source_partitions(s: SpoutSettings, consumer: Any, results: str, acker: str, dlq: str
                      ) -> list[tuple[str, int]]:
    """Every partition of the spout's sources, sorted, once the topics it needs exist with
    the partitions it needs (the internal ones made if ``create_topics``)."""
    md = s.clients.metadata(30)  # unreachable: an error naming why and what to check
    missing = [t for t in s.topics if t not in md.topics or md.topics[t].error]
    for t in missing:  # a topic the principal may not describe is left out of a listing
        one = s.clients.metadata(30, t).topics.get(t)
        check_refused(one.error if one is not None else None, Operation.DESCRIBE, t,
                      "looking up its source topics")
    if missing:
        raise ConfigError(f"source topics {missing} do not exist on {s.bootstrap_servers}")
    all_tps = sorted((t, p) for t in s.topics for p in md.topics[t].partitions)
    if s.create_topics:
        topics = {e.topic: e.partitions for e in s.edge_list()}
        # One results partition per source partition: room for every useful spout
        # parallelism, so a rebalance never needs to add partitions.
        topics |= {results: max(s.num_tasks, len(all_tps)), dlq: 1}
        if s.num_ackers:
            topics[acker] = s.num_ackers
        ensure_topics(s.clients, topics, 30)
        md = consumer.list_topics(timeout=30)
    have = len(md.topics[results].partitions) if results in md.topics else 0
    if have < s.num_tasks:
        raise ConfigError(f"{results} has {have} partitions but the spout has "
                          f"{s.num_tasks} tasks: one results partition per task is needed")
    if s.num_ackers and acker in md.topics:
        have = len(md.topics[acker].partitions)
        if have != s.num_ackers:
            raise ConfigError(
                f"num_ackers is {s.num_ackers} but {acker} has {have} partitions: "
                "inits would reach the wrong acker tasks")
    return all_tps


def start_offsets(s: SpoutSettings, consumer: Any, sources: list[tuple[str, int]],
                  committed: list[int]) -> list[int]:
    """Where each source partition starts: its group's committed offset, or, where it has
    none (a new topology), as the spout's ``start`` says."""
    from confluent_kafka import TopicPartition

    if s.start == "earliest" or all(o >= 0 for o in committed):
        return [max(o, 0) for o in committed]
    new = [tp for tp, o in zip(sources, committed, strict=True) if o < 0]
    if s.start == "latest":
        at = {tp: consumer.get_watermark_offsets(TopicPartition(*tp), timeout=30)[1]
              for tp in new}
    else:
        group = s.start.removeprefix("group:")
        other = s.clients.consumer({"group.id": group, "enable.auto.commit": False})
        try:
            at = {(c.topic, c.partition): max(c.offset, 0) for c in other.committed(
                [TopicPartition(*tp) for tp in new], timeout=30)}
        finally:
            other.close()
    log.info("spout %s starts %s where its group committed nothing (%s): %s",
             s.component, [f"{t}[{p}]" for t, p in new], s.start,
             [at[tp] for tp in new])
    # Committed at once: a restart before the first ack starts there too, not at a later
    # end (what came in between would be skipped).
    consumer.commit(offsets=[TopicPartition(t, p, at[(t, p)]) for t, p in new],
                    asynchronous=False)
    return [o if o >= 0 else at[tp] for tp, o in zip(sources, committed, strict=True)]


def read_ahead(records: int, backoff_ms: int) -> dict[str, int]:
    """The source consumer's bounds on what it fetches ahead of the spout: about
    ``records`` per partition and one fetch more. A fetch is at most 1 MiB (512 KiB a
    partition; a larger record still comes whole), and a queue that was full is looked
    at again after ``backoff_ms``: librdkafka's second (its default) held the spout up."""
    return {"queued.min.messages": records, "fetch.queue.backoff.ms": backoff_ms,
            "max.partition.fetch.bytes": 512 << 10, "fetch.max.bytes": 1 << 20}


def warm_up() -> None:
    """Have pyarrow import pandas now: its first ``pa.array()`` does, which takes a
    noticeable part of a second."""
    import pyarrow as pa

    pa.array([0])
