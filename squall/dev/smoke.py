"""A smoke check of the stack and the core: tuple trees through a real acker topic.

Word-count-shaped trees are produced as packed acker batches, read back,
applied to the ledger, and their results produced to a results topic and read
back; every tree must complete.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass

from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch, AckerRecord, Outcome
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.wire.internal import (
    decode_acker_batch,
    decode_results,
    encode_acker_batch,
    encode_results,
)
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients


@dataclass(frozen=True)
class SmokeReport:
    trees: int
    records: int
    completed: int
    seconds: float

    def as_dict(self) -> dict[str, float]:
        return {"trees": self.trees, "records": self.records, "completed": self.completed,
                "seconds": round(self.seconds, 3)}


def word_count_records(trees: int, seed: int = 0) -> list[list[AckerRecord]]:
    """One list of records per tree: spout -> split into 10 words -> count."""
    rng = random.Random(seed)
    anch = Anchoring(lambda: rng.getrandbits(63) + 1)
    out = []
    for _ in range(trees):
        e = anch.spout_emit(spout_task=0, n_targets=1)
        sentence = Tuple(["a b c d e f g h i j"], ("sentence",), e.anchors[0])
        words = [Tuple([w], ("word",), a) for w, a in
                 zip("abcdefghij", anch.emit([sentence], 10), strict=True)]
        recs = [e.init, *anch.ack(sentence)]
        for w in words:
            recs += anch.ack(w)
        out.append(recs)
    return out


def run_smoke(kafka: KafkaClients, trees: int = 10_000, batch: int = 2_000,
              timeout_s: float = 60.0) -> SmokeReport:
    from confluent_kafka import TopicPartition

    run = uuid.uuid4().hex[:8]
    acker_topic, results_topic = f"squall.smoke-{run}.acker", f"squall.smoke-{run}.results"
    ensure_topics(kafka, {acker_topic: 1, results_topic: 1}, timeout_s)
    records = [r for tree in word_count_records(trees) for r in tree]
    t0 = time.perf_counter()
    producer = kafka.producer({"linger.ms": 5})
    for i in range(0, len(records), batch):
        chunk = AckerBatch.from_records(records[i:i + batch], int(time.time() * 1000))
        producer.produce(acker_topic, encode_acker_batch(chunk, int(time.time() * 1000)),
                         partition=0)
    producer.flush(timeout_s)

    consumer = kafka.consumer({"group.id": f"smoke-{run}", "enable.auto.commit": False})
    ledger = Ledger(timeout_ms=30_000)
    applied = 0
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign([TopicPartition(acker_topic, 0, 0)])
        seq = 0
        while applied < len(records) and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                raw = msg.value()
                if msg.error() or raw is None:
                    continue
                b = decode_acker_batch(raw)
                applied += len(b)
                now = int(time.time() * 1000)
                res = ledger.apply(b, now, seq)
                seq += 1
                if len(res):
                    producer.produce(results_topic, encode_results(res, now), partition=0)
        producer.flush(timeout_s)
        consumer.assign([TopicPartition(results_topic, 0, 0)])
        completed = 0
        while completed < trees and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.5):
                raw = msg.value()
                if not msg.error() and raw is not None:
                    res = decode_results(raw)
                    completed += int((res.outcomes == Outcome.ACKED).sum())
    finally:
        consumer.close()
    return SmokeReport(trees, applied, completed, time.perf_counter() - t0)
