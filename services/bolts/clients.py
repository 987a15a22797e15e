"""Kafka clients kept for the life of a Spark Python worker, one of each per broker.

Spark reuses its Python workers across tasks and micro-batches; a client made
per task cost a connection and a metadata round trip every time.
"""

from __future__ import annotations

import uuid
from typing import Any

from services.bolts import heap

_PRODUCERS: dict[str, Any] = {}
_READERS: dict[str, Any] = {}


def producer(bootstrap: str) -> Any:
    """The worker's producer (idempotent: a retried send is not written twice)."""
    from confluent_kafka import Producer

    p = _PRODUCERS.get(bootstrap)
    if p is None:
        heap.grew()
        p = _PRODUCERS[bootstrap] = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2,
                                              "enable.idempotence": True})
    return p


def edge_consumer(bootstrap: str) -> Any:
    """The worker's consumer of edge ranges (assigned per range, never group-joined).

    It reads only what is known to be there, so fetches need not wait for data;
    but 10 ms, not less: Tansu answered fetches of 1 ms empty, again and again,
    from offsets that hold data. A fetch left waiting at the log's end holds up
    the next range's first fetch at most this long. A range the broker no longer
    has is an error (``auto.offset.reset``), never a silent jump.
    """
    from confluent_kafka import Consumer

    c = _READERS.get(bootstrap)
    if c is None:
        heap.grew()
        c = _READERS[bootstrap] = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"squall-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20, "auto.offset.reset": "error",
            "fetch.wait.max.ms": 10})
    return c
