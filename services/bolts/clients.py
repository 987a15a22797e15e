"""Kafka clients kept for the life of a Spark Python worker, one of each per broker.

Spark reuses its Python workers across tasks and micro-batches; a client made
per task cost a connection and a metadata round trip every time. The user's client
properties come from the worker's environment (squall/kafka_clients.py).
"""

from __future__ import annotations

import uuid
from typing import Any

from services.bolts.runtime import heap
from squall.core.errors import KafkaUnavailable
from squall.kafka import group_offsets
from squall.kafka_clients import from_environment

_PRODUCERS: dict[str, Any] = {}
_READERS: dict[str, Any] = {}


def producer(bootstrap: str) -> Any:
    """The worker's producer (idempotent: a retried send is not written twice)."""
    p = _PRODUCERS.get(bootstrap)
    if p is None:
        heap.grew()
        p = _PRODUCERS[bootstrap] = from_environment(bootstrap).producer(
            {"linger.ms": 2, "enable.idempotence": True})
    return p


def edge_consumer(bootstrap: str) -> Any:
    """The worker's consumer of edge ranges (assigned per range, never group-joined).

    It reads only what is known to be there, so fetches need not wait for data;
    10 ms leaves room for a broker slow to find the offset (docs/kafka.md). A fetch
    left waiting at the log's end holds up
    the next range's first fetch at most this long. A range the broker no longer
    has is an error (``auto.offset.reset``), never a silent jump.
    """
    c = _READERS.get(bootstrap)
    if c is None:
        heap.grew()
        c = _READERS[bootstrap] = from_environment(bootstrap).consumer({
            "group.id": f"squall-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 10})
    return c


_COMMITTED: dict[tuple[str, str], tuple[float, dict[str, int]]] = {}
#: How stale the spouts' committed offsets may be (they only let applied records go).
COMMITTED_MAX_AGE_S = 10.0


def spout_committed(bootstrap: str, groups: dict[str, tuple[str, ...]],
                    now_s: float) -> dict[str, int]:
    """The spouts' committed offsets, ``{"topic:partition": offset}``, for ``groups``
    (consumer group -> its source topics); cached ``COMMITTED_MAX_AGE_S``. Best effort: a
    broker that does not answer gives what was known (records are kept a little longer)."""
    out: dict[str, int] = {}
    for group, topics in sorted(groups.items()):
        at, known = _COMMITTED.get((bootstrap, group), (-1e18, {}))
        if now_s - at < COMMITTED_MAX_AGE_S:
            out.update(known)
            continue
        try:
            got = {f"{t}:{p}": o for t, ps in group_offsets(
                from_environment(bootstrap), group, topics, 5).items() for p, o in ps.items()}
        except KafkaUnavailable:
            got = known
        _COMMITTED[(bootstrap, group)] = (now_s, got)
        out.update(got)
    return out
