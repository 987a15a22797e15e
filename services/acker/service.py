"""The acker service: Kafka in, results out, around :class:`AckerTask`.

One process runs one or more acker tasks; task i owns partition i of
``squall.<topo>.acker`` (assigned, not group-subscribed, so it never moves
under a rebalance). Results go to ``squall.<topo>.results``, partition = the
spout task. The committed offset of an acker partition is its watermark,
committed only after the results produced so far are confirmed.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from typing import Any

import numpy as np

from services.acker.listener import AckerListener
from services.acker.settings import AckerSettings
from services.loop_queries import Handler, LoopQueries, json_route
from squall import lease
from squall.core.control.kafka_acls import Operation
from squall.core.reliability.clock import Clock
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.reliability.records import Outcome, Results
from squall.core.tasks.acker_task import AckerTask, Applied, BadRecord, Message
from squall.core.topology.topics import ACKER_COMPONENT, acker_topic, dlq_topic, results_topic
from squall.core.wire.internal import encode_fail_reasons, encode_results
from squall.kafka import check_refused, consume_ready, ensure_topics, produce, unread
from squall.wallclock import SystemClock

log = logging.getLogger("squall.acker")

#: Results per Kafka message: keeps messages well under the broker's size limit.
_RESULTS_PER_MESSAGE = 20_000
_OUTCOME_LABEL = {Outcome.ACKED: "acked", Outcome.FAILED: "failed",
                  Outcome.TIMED_OUT: "timed_out"}


class AckerService:
    def __init__(self, settings: AckerSettings, listener: AckerListener,
                 clock: Clock | None = None) -> None:
        self.s = settings
        self.listener = listener
        self.clock = clock or SystemClock()
        self.topic = acker_topic(settings.topology)
        self.results_topic = results_topic(settings.topology)
        self.dlq = settings.dlq_topic or dlq_topic(settings.topology)
        self.tasks: dict[int, AckerTask] = {}
        self.queries = LoopQueries()
        self.ready = threading.Event()
        self._spout_tasks: tuple[int, int] | None = None  # results partitions, when learnt
        # Its worker's lease (squall/core/control/lease.py): no result is published and no
        # offset committed while it has run out (the tasks may have moved meanwhile).
        self.lease = lease.from_environment()

    # ----- the loop ------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        from confluent_kafka import TopicPartition

        s = self.s
        if s.create_topics:
            ensure_topics(s.clients, {self.topic: s.num_ackers, self.dlq: 1}, 30)
        conf = {"error_cb": self._kafka_error}
        consumer = s.clients.consumer({
            **conf, "group.id": f"squall.{s.topology}.acker", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "fetch.max.bytes": 64 << 20,
            "max.partition.fetch.bytes": 16 << 20, "fetch.wait.max.ms": s.fetch_wait_max_ms,
        })
        self.producer = s.clients.producer({**conf, "linger.ms": 2, "enable.idempotence": True})
        now = self.clock.now_ms()
        committed = consumer.committed([TopicPartition(self.topic, t) for t in s.tasks],
                                       timeout=30)
        for tp in committed:
            start = tp.offset if tp.offset >= 0 else 0
            self.tasks[tp.partition] = AckerTask(tp.partition, s.timeout_ms, start, now,
                                                 gated=s.timeout_clock == "bolts")
            log.info("acker task %d starts at offset %d of %s (fetches wait up to %d ms)",
                     tp.partition, start, self.topic, s.fetch_wait_max_ms)
        consumer.assign([TopicPartition(self.topic, t.task, t.next_offset)
                         for t in self.tasks.values()])
        self.ready.set()
        last_commit = last_beat = now
        try:
            while not stop.is_set():
                if not self.lease.wait(stop):
                    break
                self.queries.answer()
                msgs = consume_ready(consumer, s.max_poll_messages, 0.05)
                if not self.lease.holds():  # the wait may have been a freeze: read again later
                    unread(consumer, msgs)
                    continue
                now = self.clock.now_ms()
                by_part: dict[int, list[Message]] = defaultdict(list)
                for m in msgs:
                    if m.error():
                        check_refused(m.error(), Operation.READ, self.topic,
                                      "reading its records")
                        log.warning("consume error on %s: %s", self.topic, m.error())
                        continue
                    by_part[m.partition() or 0].append(Message(m.offset() or 0, m.value()))
                self.listener.consumed(len(msgs))
                for p, batch in by_part.items():
                    self._handle(self.tasks[p], batch, now)
                for task in self.tasks.values():
                    clock = self._expiry_clock(consumer, task, now)
                    self._publish(task.expire(clock), task, clock)
                if now - last_beat >= s.heartbeat_interval_s * 1000:
                    self._heartbeat(consumer, now)
                    last_beat = now
                self.producer.poll(0)
                if now - last_commit >= s.commit_interval_s * 1000:
                    self._commit(consumer)
                    last_commit = now
        finally:
            log.info("acker stopping: flushing results and committing watermarks")
            if self.lease.holds():
                self._commit(consumer)
            consumer.close()

    def routes(self) -> dict[str, Handler]:
        """``/trees/<root>`` (16 hex digits): the tree's entry if one of this acker's tasks
        holds it open."""
        return {"/trees/": json_route(self.queries, self._tree)}

    def _tree(self, parts: list[str]) -> dict[str, Any] | None:
        try:
            root = int(parts[0], 16) if len(parts) == 1 else -1
        except ValueError:
            root = -1
        if not 0 <= root < 1 << 64:
            raise ValueError("ask /trees/<root>, the root in hex") from None
        for task in self.tasks.values():
            e = task.ledger.get(root)
            if e is not None:
                return {"acker_task": task.task, "open": True, "failed": e.failed,
                        "init_seen": e.task is not None, "spout_task": e.task}
        return None

    def _handle(self, task: AckerTask, batch: list[Message], now: int) -> None:
        applied: Applied = task.apply(batch, now)
        self.listener.applied(applied.kinds.tolist())
        for bad in applied.bad:
            self._dead_letter(task.task, bad, batch)
        self._publish(applied.results, task, now)

    def _expiry_clock(self, consumer: Any, task: AckerTask, now: int) -> int:
        """Wall time once caught up; while re-reading a backlog, the records' own time.

        A tree whose last ack is still in the backlog must not time out
        because the acker was down: time advances as the records do.
        """
        from confluent_kafka import TopicPartition

        _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, task.task),
                                                 cached=True)
        behind = high is not None and high >= 0 and task.next_offset < high
        return min(now, task.event_time_ms) if behind else now

    # ----- outputs ------------------------------------------------------

    def _heartbeat(self, consumer: Any, now: int) -> None:
        """Each task's timeout clock to every spout task (the spouts' backstop runs on it)."""
        if self._spout_tasks is None or now - self._spout_tasks[1] > 30_000:
            md = consumer.list_topics(self.results_topic, timeout=5)
            t = md.topics.get(self.results_topic)
            self._spout_tasks = (len(t.partitions) if t and t.partitions else 0, now)
        for task in self.tasks.values():
            at = task.timeout_now(self._expiry_clock(consumer, task, now))
            self.listener.timeout_clock(
                task.task, float("nan") if at is None else max(0, now - at) / 1000)
            if at is None:
                continue  # no clock yet: the spouts' backstop waits too
            for spout_task in range(self._spout_tasks[0]):
                produce(self.producer, self.results_topic, encode_results(Results.empty(), at),
                        partition=spout_task, key=_acker_key(task),
                        on_delivery=self._delivered)

    def _publish(self, results: Results, task: AckerTask, clock: int) -> None:
        n = len(results)
        if not n:
            return
        decided = results.outcomes != Outcome.RESET
        self.listener.decided(
            {label: int((results.outcomes == o).sum()) for o, label in _OUTCOME_LABEL.items()},
            n - int(decided.sum()), results.latency_ms[decided] / 1000.0)
        # Stamped with the clock the trees were judged at (the spouts' backstop runs on it).
        stamp = task.timeout_now(clock)
        stamp = -1 if stamp is None else stamp
        reasons = task.take_reasons(results)
        for spout_task in np.unique(results.tasks).tolist():
            part = results.select(results.tasks == spout_task)
            mine = {r: reasons[r] for r in part.roots.tolist() if r in reasons}
            for raw in encode_fail_reasons(mine, stamp) if mine else ():  # before the results
                produce(self.producer, self.results_topic, raw, partition=spout_task,
                        key=_acker_key(task), on_delivery=self._delivered)
            for lo in range(0, len(part), _RESULTS_PER_MESSAGE):
                chunk = part.slice(lo, lo + _RESULTS_PER_MESSAGE)
                produce(self.producer, self.results_topic, encode_results(chunk, stamp),
                        partition=spout_task, key=_acker_key(task),
                        on_delivery=self._delivered)

    def _dead_letter(self, task: int, bad: BadRecord, batch: list[Message]) -> None:
        log.warning("bad record at %s[%d]@%d: %s (dead-lettered to %s)", self.topic, task,
                    bad.offset, bad.reason, self.dlq)
        self.listener.bad_record(task, f"{self.topic}[{task}]@{bad.offset}", bad.reason,
                                 self.clock.now_ms())
        payload = next((m.payload for m in batch if m.offset == bad.offset), None)
        letter = DeadLetterHeaders(bad.reason, self.topic, task, bad.offset, 0, ACKER_COMPONENT)
        produce(self.producer, self.dlq, payload or b"", headers=letter.headers(),
                on_delivery=self._delivered)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            check_refused(err, Operation.WRITE, msg.topic(), "writing results")
            self.listener.undelivered()
            log.error("could not deliver to %s[%s]: %s", msg.topic(), msg.partition(), err)

    def _commit(self, consumer: Any) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        # Results first: a watermark may pass a completed tree only once its result is out.
        wm = {t: task.watermark() for t, task in self.tasks.items()}
        left = self.producer.flush(10)
        if left:
            log.warning("%d results not yet confirmed; watermark commit postponed", left)
            return
        try:
            consumer.commit(offsets=[TopicPartition(self.topic, t, o) for t, o in wm.items()],
                            asynchronous=False)
        except KafkaException as e:
            check_refused(e.args[0] if e.args else None, Operation.READ,
                          f"squall.{self.s.topology}.acker", "committing its watermark")
            log.warning("watermark commit failed (will retry): %s", e)
            return
        for t, task in self.tasks.items():
            _, high = consumer.get_watermark_offsets(TopicPartition(self.topic, t), cached=True)
            self.listener.committed(
                t, wm[t], len(task.ledger), task.ledger.nbytes, task.take_orphans(),
                max(0, high - task.next_offset) if high is not None and high >= 0 else None)

    def _kafka_error(self, err: Any) -> None:
        log.error("Kafka: %s", err)


def _acker_key(task: AckerTask) -> bytes:
    """Results carry their acker task as the message key: a spout keeps one clock each."""
    return str(task.task).encode()
