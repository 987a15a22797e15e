"""Where is my message? On the real stack, one message in each state: committed, pending
(held in a window, its tree open in the acker), failed and waiting for its retry (with the
bolt's error), dead-lettered (with the reason), past the end of its partition."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from squall.core.reliability.retry import RetrySchedule
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.windows import Count
from squall.endpoint_fetch import Endpoints
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.message_trace import trace
from tests.integration.cluster import TELEMETRY_TOKEN
from tests.integration.helpers import (
    clients,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)

pytestmark = pytest.mark.integration


def test_trace_says_where_a_message_is_in_each_state(bootstrap: str, tmp_path: Path) -> None:
    name = f"tr{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    b = TopologyBuilder()
    b.set_spout("lines", source, scheme="json", fields=["text"])
    b.set_bolt("split", "examples.faults:SplitOrRaise", 1, outputs={"default": ["word"]}
               ).shuffle_grouping("lines")
    # three words make a window: a message of fewer waits in it, pending
    b.set_bolt("window", "examples.windows:WordsPerWindow", 1,
               outputs={"default": ["word", "count"]}).with_tumbling_window(Count(3)) \
        .shuffle_grouping("split")
    spec = b.build(name, ackers=1, retry=RetrySchedule(initial_delay_ms=600_000,
                                                       max_delay_ms=600_000, max_retries=3))
    ensure_topics(clients(bootstrap), {source: 1})
    acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, (),
                                            f"sqlite://{tmp_path / 'state.db'}")
    kafka = KafkaClients(bootstrap)
    fetch = Endpoints(headers={"Authorization": f"Bearer {TELEMETRY_TOKEN}"})
    lines = [b'{"text": "a b c"}', b'{"text": "held"}', b'{"text": "poison pill"}',
             b"{not json"]

    def where(offset: int) -> dict[str, Any]:
        return trace(kafka, spec, name, source, 0, offset,
                     [(f"http://127.0.0.1:{spout.metrics_port}", "127.0.0.1")],
                     [(f"http://127.0.0.1:{acker.metrics_port}", "127.0.0.1")], fetch)

    with acker.start(), bolts.start():
        wait_for_queries(bolts)
        produce_source(bootstrap, source, lines, 1)
        with spout.start():
            wait_for(lambda: where(0)["state"] == "committed", 120, "the first committed",
                     explain=lambda: str(where(0)) + bolts.log_tail(30))
            held = where(1)
            wait_for(lambda: where(2)["state"] == "failed", 60, "the poison failed",
                     explain=lambda: str(where(2)) + bolts.log_tail(30))
            poison = where(2)
            wait_for(lambda: where(3)["state"] == "dead_lettered", 60, "the bad one lettered",
                     explain=lambda: str(where(3)))
            bad, past, done = where(3), where(99), where(0)
            with pytest.raises(Exception, match="reads no topic"):
                trace(kafka, spec, name, "elsewhere", 0, 0, [], [], fetch)
    assert "committed up to" in done["summary"], done
    assert held["state"] == "pending", held
    assert held["where"]["failures"] == 0 and held["where"]["since_ms"] > 0
    assert held["tree"] == {**held["tree"], "open": True, "failed": False, "init_seen": True}
    assert "its tree is open in acker task 0" in held["summary"]
    assert poison["state"] == "failed" and poison["where"]["retry_ms"] > 0
    assert "a poison sentence" in poison["where"]["last_failure"]
    assert "attempt 2 is due at" in poison["summary"]
    assert bad["dead_letter"]["attempts"] == 0 and "json" in bad["dead_letter"]["reason"].lower()
    assert "dead-lettered after 0 attempts" in bad["summary"]
    assert past["state"] == "not_in_topic"
