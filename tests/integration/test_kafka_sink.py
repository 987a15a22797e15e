"""The Kafka sink on the real stack, through Storm-level replays (trees that time out after
their words were written) and Spark-level ones (the bolts job killed mid-stream): the
exactly-once sink's topic holds every word once, the at-least-once sink's every word at
least once, and every sentence is committed."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from examples.faults import EmitThenForgetEveryKth
from squall.core.errors import TopologyError
from squall.core.reliability.retry import RetrySchedule
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.kafka_sink import ID_HEADER
from squall.kafka import ensure_topics
from tests.integration.helpers import (
    clients,
    committed_offsets,
    produce_source,
    supervised_services,
    wait_for,
)

pytestmark = pytest.mark.integration
PARTS = 2
SINK_PARTS = 3


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes | None, str]]:
    """Every record of ``topic``: its value and its ``squall.id`` header."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1]
            for p in range(SINK_PARTS)}
    c.assign([TopicPartition(topic, p, 0) for p in range(SINK_PARTS)])
    out: list[tuple[bytes | None, str]] = []
    at: dict[int, int] = {}
    while True:
        msgs = c.consume(1000, 2.0)
        for m in msgs:
            if not m.error():
                at[int(m.partition() or 0)] = int(m.offset() or 0) + 1
                ids = [v.decode() for k, v in list(m.headers() or [])
                       if k == ID_HEADER and isinstance(v, bytes)]
                value = m.value()
                out.append((value.encode() if isinstance(value, str) else value,
                            ids[0] if ids else ""))
        if not msgs and all(at.get(p, 0) >= e for p, e in ends.items()):
            break
    c.close()
    return out


def test_the_exactly_once_sink_writes_each_output_once_under_replays_and_a_kill(
        bootstrap: str, tmp_path: Path) -> None:
    name = f"ks{uuid.uuid4().hex[:6]}"
    source, once, any_ = f"src-{name}", f"once-{name}", f"any-{name}"
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    # Every 5th sentence is not acked the first time: its tree times out after its words
    # were written, and the spout emits it again under a new root.
    b.set_bolt("split", EmitThenForgetEveryKth, 2,
               config={"k": 5, "state_dir": str(tmp_path / "forget")}
               ).shuffle_grouping("sentences")
    b.kafka_bolt("once", once, 2, message_field="word", exactly_once=True
                 ).fields_grouping("split", ["word"])
    b.kafka_bolt("any", any_, 2, message_field="word").shuffle_grouping("split")
    spec = b.build(name, ackers=2, message_timeout_s=8,
                   retry=RetrySchedule(initial_delay_ms=100))
    topo = tmp_path / "topology.json"
    topo.write_text(spec.to_json())
    ensure_topics(clients(bootstrap), {source: PARTS, once: SINK_PARTS, any_: SINK_PARTS})
    lines = [f"s{i}a s{i}b {i}".encode() for i in range(300)]
    truth = Counter(w.encode() for s in lines for w in s.decode().split())

    sup, bolts, acker, spout = supervised_services(topo, name, bootstrap, tmp_path,
                                                   f"sqlite://{tmp_path / 'state.db'}")
    sup.start("bolts", bolts)

    def log() -> str:
        return (tmp_path / "logs" / "bolts.log").read_text(errors="replace")[-4000:]

    def committed() -> int:
        sup.check()
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{name}.sentences", source, PARTS))

    try:
        with acker.start():
            wait_for(lambda: "bolt queries running" in log(), 180, "the bolt queries",
                     explain=log)
            # Half the sentences before the kill and half after, so the restarted job has
            # work of its own however fast the first half went.
            half = len(lines) // 2
            produce_source(bootstrap, source, lines[:half], PARTS)
            with spout.start() as sp:
                wait_for(lambda: committed() > 0, 240, "the first commits", explain=log)
                victim = sup.children["bolts"].proc
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim.pid, signal.SIGKILL)

                def restarted() -> bool:
                    sup.check()
                    return bool(sup.children["bolts"].proc.pid != victim.pid)
                wait_for(restarted, 60, "the bolts job restarted", explain=log)
                produce_source(bootstrap, source, lines[half:], PARTS)
                wait_for(lambda: committed() >= len(lines), 300, "every sentence committed",
                         explain=log)
                m = sp.metrics()
    finally:
        sup.stop(timeout_s=30)
    timeouts = m.get(f"squall_spout_failed_total{{component=sentences,reason=timeout,"
                     f"topology={name}}}", 0.0)
    assert timeouts >= 300 // 5 // 2, "the Storm-level replays did not happen"
    exactly = read_all(bootstrap, once)
    got = Counter(v for v, _ in exactly)
    assert got == truth, {w: n for w, n in got.items() if n != 1}
    assert len({i for _, i in exactly}) == len(exactly), "an id written twice"
    at_least = Counter(v for v, _ in read_all(bootstrap, any_))
    assert set(at_least) == set(truth)
    assert sum(at_least.values()) > len(truth), "the at-least-once sink saw no replay"


def test_a_sink_spec_is_checked_at_submit() -> None:
    b = TopologyBuilder()
    b.set_spout("s", "t")
    b.kafka_bolt("out", "t-out", 2, message_field="str", exactly_once=True).shuffle_grouping("s")
    with pytest.raises(TopologyError, match="needs its inputs fields- or global-grouped"):
        b.build("k")
