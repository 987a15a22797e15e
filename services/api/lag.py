"""The spouts' lag read from Kafka in the background, for ``/api/v1/topology/:id/lag`` and
the API's /metrics (squall/core/control/lag.py says what it is).

Every ``interval_s`` the monitor reads each topology's spout groups' committed offsets,
then fetches from each committed offset: the first message's timestamp is the oldest
waiting message's, and the fetch's high watermark is the log's end. A spout that is down,
or crash-looping, keeps its lag on the leader's /metrics, so the alerts on it fire.

Only the leader exports the gauges, so a cluster has one series per partition; every
replica reads, so any replica answers the route from memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from squall.core.control.cluster import TopologyRecord
from squall.core.control.history import GaugeHistory, LagPoint
from squall.core.control.lag import PartitionLag
from squall.core.topology.topics import spout_group
from squall.kafka_clients import KafkaClients, quiet_logger

log = logging.getLogger("squall.api.lag")

Key = tuple[str, int]


class LagMonitor(Collector):
    def __init__(self, clients: KafkaClients, records: Callable[[], list[TopologyRecord]],
                 leading: Callable[[], bool], now_ms: Callable[[], int],
                 interval_s: float = 10.0, timeout_s: float = 5.0) -> None:
        self.clients, self.records, self.leading, self.now_ms = clients, records, leading, now_ms
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self._lags: dict[str, list[PartitionLag]] = {}
        self._read_ms: int | None = None
        #: per topology: its lag over time, for the topology page's chart
        self._history: dict[str, GaugeHistory] = {}
        self._lock = threading.Lock()  # one reading at a time: the loop's or a route's
        self._consumer: Any = None
        #: a consumer per spout group, to read where it committed
        self._groups: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="api-lag", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def of(self, rec: TopologyRecord) -> list[PartitionLag]:
        """The last reading of ``rec``'s spouts, read now if there is none yet (a topology
        just submitted, a replica just started)."""
        have = self._lags.get(rec.id)
        if have is None:
            have = self.read([rec]).get(rec.id, [])
            self._lags[rec.id] = have
        return have

    def history(self, tid: str, now_ms: int, seconds: int) -> list[LagPoint]:
        """The topology's lag as read over the last ``seconds``: all its partitions'
        messages, and the oldest waiting message's age."""
        h = self._history.get(tid)
        return h.over(now_ms, seconds) if h else []

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                recs = self.records()
                got = self.read(recs)
                self._lags = got
                now = self._read_ms = self.now_ms()
                for tid, lags in got.items():
                    self._history.setdefault(tid, GaugeHistory()).add(LagPoint(
                        now, sum(x.messages for x in lags),
                        max((x.seconds(now) for x in lags), default=0.0)))
                for gone in set(self._history) - set(got):
                    del self._history[gone]
            except Exception as e:  # Kafka or ZooKeeper trouble: the next round tries again
                log.warning("could not read the spouts' lag: %s", e)

    def read(self, recs: list[TopologyRecord]) -> dict[str, list[PartitionLag]]:
        groups = {(r.id, s.name): (spout_group(r.id, s.name), s.topics)
                  for r in recs for s in r.spec.spouts}
        if not groups:
            return {}
        committed: dict[tuple[str, str], dict[Key, int]] = {}
        for k, (group, topics) in groups.items():
            try:
                committed[k] = self._committed(group, topics)
            except Exception as e:  # that group only: the others are still read
                log.warning("no committed offsets for %s: %s", group, e)
        with self._lock:
            for gone in set(self._groups) - {g for g, _ in groups.values()}:
                self._groups.pop(gone).close()
        starts: dict[Key, int] = {}
        for offsets in committed.values():
            starts.update(offsets)
        ends = self._fetch_from(starts)
        out: dict[str, list[PartitionLag]] = {r.id: [] for r in recs}
        for (tid, spout), offsets in committed.items():
            for (topic, part), at in sorted(offsets.items()):
                end, oldest = ends.get((topic, part), (None, None))
                if end is not None:
                    out[tid].append(PartitionLag(spout, topic, part, at, max(end, at), oldest))
        return out

    def _committed(self, group: str, topics: tuple[str, ...]) -> dict[Key, int]:
        """Where ``group`` committed in ``topics``, through a consumer of that group
        (OffsetFetch), kept for the next round. Not the Admin API's
        ListConsumerGroupOffsets: librdkafka aborts the process when that request's
        coordinator connection drops (confluentinc/librdkafka#4605), as a broker's death
        does."""
        from confluent_kafka import TopicPartition

        with self._lock:
            c = self._groups.get(group)
            if c is None:
                c = self._groups[group] = self.clients.consumer({
                    "group.id": group, "enable.auto.commit": False,
                    "logger": quiet_logger("lag")})
            md = c.list_topics(timeout=self.timeout_s)
            tps = [TopicPartition(t, p) for t in topics if t in md.topics
                   for p in md.topics[t].partitions]
            got = c.committed(tps, timeout=self.timeout_s) if tps else []
        return {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset >= 0}

    def _fetch_from(self, starts: dict[Key, int]) -> dict[Key, tuple[int | None, int | None]]:
        """Per partition: the log's end (the fetch's high watermark) and the timestamp of
        the message at its start, if there is one."""
        from confluent_kafka import KafkaError, TopicPartition

        if not starts:
            return {}
        with self._lock:
            if self._consumer is None:
                self._consumer = self.clients.consumer({
                    "group.id": "squall-api-lag", "enable.auto.commit": False,
                    "enable.partition.eof": True, "max.partition.fetch.bytes": 65536,
                    "fetch.max.bytes": 1 << 20, "logger": quiet_logger("lag")})
            c = self._consumer
            c.assign([TopicPartition(t, p, o) for (t, p), o in starts.items()])
            oldest: dict[Key, int | None] = {}
            try:
                deadline = self.now_ms() + int(self.timeout_s * 1000)
                while len(oldest) < len(starts) and self.now_ms() < deadline:
                    for m in c.consume(500, 0.2):
                        key = (m.topic() or "", m.partition() or 0)
                        if key in oldest:
                            continue
                        err = m.error()
                        if err is None:
                            kind, ts = m.timestamp()
                            oldest[key] = ts if kind and ts >= 0 else None
                        elif err.code() == KafkaError._PARTITION_EOF:
                            oldest[key] = None
                out: dict[Key, tuple[int | None, int | None]] = {}
                for key in starts:
                    hw = c.get_watermark_offsets(TopicPartition(*key), cached=True)
                    end = int(hw[1]) if hw and hw[1] >= 0 else None
                    out[key] = (end, oldest.get(key))
                return out
            finally:
                c.unassign()

    def collect(self) -> Iterator[Metric]:
        if not self.leading():
            return
        now = self.now_ms()
        labels = ["topology", "component", "topic", "partition"]
        messages = GaugeMetricFamily("squall_source_lag_messages",
                                     "Source messages not yet committed by the spout",
                                     labels=labels)
        seconds = GaugeMetricFamily("squall_source_lag_seconds", "Age of the oldest source "
                                    "message not yet committed by the spout", labels=labels)
        committed = GaugeMetricFamily("squall_source_committed_offset",
                                      "The spout's committed offset, read from Kafka",
                                      labels=labels)
        end = GaugeMetricFamily("squall_source_end_offset", "The source partition's end",
                                labels=labels)
        for tid, lags in sorted(self._lags.items()):
            for x in lags:
                at = [tid, x.component, x.topic, str(x.partition)]
                messages.add_metric(at, x.messages)
                seconds.add_metric(at, x.seconds(now))
                committed.add_metric(at, x.committed)
                end.add_metric(at, x.end)
        yield from (messages, seconds, committed, end)
        if self._read_ms is not None:
            read = GaugeMetricFamily("squall_source_lag_read_timestamp_seconds",
                                     "When the lag was last read from Kafka")
            read.add_metric([], self._read_ms / 1000.0)
            yield read
