"""What an operator reads on a bad day, on a real API over the real broker: the spouts' lag
read from Kafka (so it shows, and grows, with no spout running), in Storm's route and on
/metrics, and the API's own process metrics."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from squall.core.topology.topics import spout_group
from squall.kafka import commit_group_offsets, ensure_topics
from squall.kafka_clients import KafkaClients
from tests.integration.cluster import ApiProcess
from tests.integration.helpers import clients, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def quick_api(ns: str, bootstrap: str, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[ApiProcess]:
    """An API that reads the lag every second."""
    p = ApiProcess(ns, bootstrap, tmp_path_factory.mktemp("api") / "api.log",
                   "--lag-interval-s", "1").start()
    wait_for(p.leads, 30, "the only replica to lead")
    yield p
    p.stop()


def samples(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    body = httpx.get(f"{url}/metrics", timeout=10).text
    return {tuple(sorted(s.labels.items())): s.value
            for fam in text_string_to_metric_families(body) for s in fam.samples
            if s.name == name}


def produce(bootstrap: str, topic: str, partition: int, n: int, ts_ms: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, f"m{i}".encode(), partition=partition, timestamp=ts_ms)
    assert p.flush(30) == 0


def test_the_lag_comes_from_kafka_and_grows_with_no_spout_running(
        quick_api: ApiProcess, bootstrap: str, tmp_path: Path) -> None:
    topic = f"src-lag-{uuid.uuid4().hex[:8]}"
    ensure_topics(clients(bootstrap), {topic: 2})
    with quick_api.client() as http:
        r = http.post("/topologies", json={
            "name": f"lagged{uuid.uuid4().hex[:6]}", "spouts": [
                {"name": "sentences", "topics": [topic]}]}, params={"activate": "false"})
        assert r.status_code == 201, r.text
        tid = r.json()["id"]
        # The spout committed 3 of 10 in partition 0 and all 4 of partition 1, then died.
        old = int(time.time() * 1000) - 120_000
        produce(bootstrap, topic, 0, 10, old)
        produce(bootstrap, topic, 1, 4, old)
        commit_group_offsets(KafkaClients(bootstrap), spout_group(tid, "sentences"),
                             [(topic, 0, 3), (topic, 1, 4)])

        def lag_route() -> dict[str, dict[str, float]]:
            body = http.get(f"/api/v1/topology/{tid}/lag").json()
            assert body["sentences"]["spoutId"] == "sentences"
            assert body["sentences"]["spoutType"] == "KAFKA"
            return dict(body["sentences"]["spoutLagResult"].get(topic, {}))

        wait_for(lambda: lag_route().get("0", {}).get("lag") == 7, 30,
                 "the route to show partition 0's lag")
        parts = lag_route()
        assert parts["0"]["consumerCommittedOffset"] == 3 and parts["0"]["logHeadOffset"] == 10
        assert 110 <= parts["0"]["lagSeconds"] <= 600  # the oldest waiting message's age
        assert parts["1"] == {"consumerCommittedOffset": 4, "logHeadOffset": 4, "lag": 0,
                              "lagSeconds": 0.0}

        # More arrives; nothing reads it: the leader's /metrics follow, from Kafka alone.
        produce(bootstrap, topic, 0, 5, int(time.time() * 1000))
        at = (("component", "sentences"), ("partition", "0"), ("topic", topic),
              ("topology", tid))

        def exported() -> float | None:
            return samples(quick_api.url, "squall_source_lag_messages").get(at)

        wait_for(lambda: exported() == 12, 30, "the exported lag to reach 12")
        seconds = samples(quick_api.url, "squall_source_lag_seconds")[at]
        assert seconds >= 110
        assert samples(quick_api.url, "squall_source_end_offset")[at] == 15
        assert samples(quick_api.url, "squall_source_committed_offset")[at] == 3
        wait_for(lambda: lag_route()["0"]["lag"] == 12, 30, "the route to follow")


def test_the_api_exports_its_process_metrics(quick_api: ApiProcess) -> None:
    rss = samples(quick_api.url, "process_resident_memory_bytes")
    assert rss and all(v > 10 * 2**20 for v in rss.values()), rss
    assert samples(quick_api.url, "process_cpu_seconds_total")
    assert samples(quick_api.url, "process_open_fds")
