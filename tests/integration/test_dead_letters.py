"""Dead letters on the real stack: a message that failed is listed with its reason, shown
with its payload, and sent back into the topology once, even when a replay was interrupted
after writing it and is run again; its words are counted once, in exact state."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer

from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.errors import UsageError
from squall.core.reliability.letter_replays import REPLAY_HEADER, Replay, replay_key
from squall.core.reliability.retry import RetrySchedule
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.topics import dlq_replays_topic
from squall.core.trident.codec import MapKind
from squall.dead_letters import SCAN_LETTERS, letters, listing, read_all, replay, show
from squall.kafka import end_offset, ensure_topics
from squall.kafka_clients import KafkaClients
from tests.integration.helpers import (
    clients,
    committed_offsets,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)

pytestmark = pytest.mark.integration


def test_a_dead_letter_is_replayed_once_and_counted_once(bootstrap: str,
                                                          tmp_path: Path) -> None:
    name = f"dl{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", "examples.faults:FailEveryKth", 1, outputs={"default": ["word"]},
               config={"k": 5, "state_dir": str(tmp_path / "once")}).shuffle_grouping("sentences")
    b.persistent_aggregate("count", ["word"], "count", 1, kind="opaque"
                           ).fields_grouping("split", ["word"])
    spec = b.build(name, ackers=1, retry=RetrySchedule(max_retries=0))
    ensure_topics(clients(bootstrap), {source: 1})
    url = f"sqlite://{tmp_path / 'state.db'}"
    acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, (), url)
    kafka = KafkaClients(bootstrap)
    lines = [b"a b 1", b"c d 5", b"e f 2"]

    def committed() -> int:
        return max(committed_offsets(bootstrap, f"squall.{name}.sentences", source, 1))

    with acker.start(), bolts.start():
        wait_for_queries(bolts)
        produce_source(bootstrap, source, lines, 1)
        with spout.start():
            wait_for(lambda: committed() >= 3, 120, "the three committed",
                     explain=lambda: bolts.log_tail(30))
            (letter,), window = letters(kafka, name)
            assert (window.first, window.end) == (letter.dlq_offset, letter.dlq_offset + 1)
            assert letters(kafka, name, before=letter.dlq_offset)[0] == []
            assert letter.why is not None and letter.why.offset == 1
            assert "raised RuntimeError: sentence 5 fails once" in letter.why.reason
            listed = listing(kafka, name, reason="RuntimeError")
            assert listed["total"] == 1 and listed["by_reason"] == {"failed after 1 attempts": 1}
            assert show(kafka, name, letter.dlq_offset)["payload_text"] == "c d 5"
            assert listing(kafka, name, reason="no such reason")["total"] == 0
            # a replay interrupted after it wrote the message, before it said so
            ensure_topics(clients(bootstrap), {dlq_replays_topic(name): 1})
            p = Producer({"bootstrap.servers": bootstrap})
            start = end_offset(kafka, source, 0)
            p.produce(dlq_replays_topic(name), Replay(letter.dlq_offset, source, 0, start)
                      .encode(), partition=0)
            p.produce(source, letter.value, partition=0,
                      headers=[(REPLAY_HEADER, replay_key(name, letter.dlq_offset).encode())])
            assert p.flush(10) == 0
            dry = replay(kafka, spec, name, [letter.dlq_offset], now_ms=1, dry_run=True)
            assert [r["dlq_offset"] for r in dry["would_replay"]] == [letter.dlq_offset]
            assert dry["replayed"] == [] and dry["already"] == []
            with pytest.raises(UsageError, match="span 10001 offsets"):
                replay(kafka, spec, name, [0, SCAN_LETTERS], now_ms=1)
            again = replay(kafka, spec, name, [letter.dlq_offset, 99], now_ms=1)
            assert [r["dlq_offset"] for r in again["replayed"]] == [letter.dlq_offset]
            assert again["replayed"][0]["replayed_to"] == f"{source}[0]@3"
            assert again["refused"] == [{"dlq_offset": 99, "why": "no such dead letter"}]
            once_more = replay(kafka, spec, name, [letter.dlq_offset], now_ms=2)
            assert once_more["replayed"] == [] and len(once_more["already"]) == 1
            wait_for(lambda: committed() >= 4, 120, "the replayed message committed",
                     explain=lambda: bolts.log_tail(30))
    sent_back = [m for m in read_all(kafka, source)
                 if any(k == REPLAY_HEADER for k, _ in m.headers() or [])]
    assert len(sent_back) == 1
    store = open_store(url, StoreName(f"{name}.count", 0, MapKind.OPAQUE))
    counts = Counter({str(w): v.curr for (w,), v in store.items()})
    store.close()
    assert counts == Counter(w for s in lines for w in s.decode().split())
