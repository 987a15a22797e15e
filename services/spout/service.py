"""The spout service: Kafka in and out around :class:`SpoutTask`.

One consumer per process reads the source partitions assigned to its tasks (partition i
of the sorted source partitions goes to task ``i mod N``, as storm-kafka-client assigns
them); a second one reads each task's results partition, so results never queue behind
prefetched source records. Each incarnation's root salt is marked in its results
partition (not every broker keeps a commit's metadata), so a restarted spout can
recognise trees acked before it could commit them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from services.loop_queries import Handler, LoopQueries, json_route
from services.spout import kept, startup
from services.spout.dead_letters import DeadLetters
from services.spout.listener import SpoutListener
from services.spout.results_scan import scan_results
from services.spout.settings import SpoutSettings
from squall import lease
from squall.core.control.kafka_acls import Operation
from squall.core.errors import WireFormatError
from squall.core.reliability.clock import Clock
from squall.core.reliability.ids import new_salt
from squall.core.reliability.progress import AckerClocks
from squall.core.reliability.records import Outcome
from squall.core.tasks.spout_effects import Emission, Settled, Undeliverable
from squall.core.tasks.spout_reasons import FailReasons
from squall.core.tasks.spout_task import SpoutConfig, SpoutTask
from squall.core.topology.model import Guarantee
from squall.core.topology.topics import acker_topic, dlq_topic, results_topic, spout_group
from squall.core.wire.internal import (
    decode_fail_reasons,
    decode_letter_marker,
    decode_results,
    decode_salt_marker,
    encode_acker_messages,
    encode_salt_marker,
    results_clock,
)
from squall.core.wire.scheme import load_scheme
from squall.core.wire.tuple_batch import encode_tuples_chunked
from squall.kafka import check_refused, consume_ready, produce, unread
from squall.wallclock import SystemClock

log = logging.getLogger("squall.spout")
TP = tuple[str, int]
#: How long a pass waits for source records: briefly while trees are in flight, whose
#: results come on the other consumer and wait for the next pass (a long pass would add
#: its length to each tree's round trip).
SOURCE_WAIT_S, SOURCE_WAIT_IN_FLIGHT_S = 0.02, 0.002


@dataclass
class TaskIO:
    """A task and what the service keeps for it: its partitions and commit metadata."""

    task: SpoutTask
    sources: list[TP]
    results_start: int


class SpoutService:
    def __init__(self, settings: SpoutSettings, listener: SpoutListener,
                 clock: Clock | None = None) -> None:
        self.s = settings
        self.listener = listener
        self.clock = clock or SystemClock()
        self.results = results_topic(settings.topology)
        self.acker = acker_topic(settings.topology)
        self.dlq = settings.dlq_topic or dlq_topic(settings.topology)
        self.io: dict[int, TaskIO] = {}
        self._route: dict[TP, tuple[SpoutTask, int]] = {}
        self._paused: dict[tuple[int, int], float] = {}
        self.letters = DeadLetters(self.dlq, self.results, settings.component, listener,
                                   self.clock)
        self._acker_clocks: dict[int, AckerClocks] = {}  # by spout task
        self._reasons = FailReasons()
        # The last commit failed: the next waits for the interval, not for a step.
        self._commit_failed = False
        self.queries = LoopQueries()
        # Its worker's lease (squall/core/control/lease.py): nothing is emitted or committed
        # while it has run out, as after a freeze, when the tasks may have moved.
        self.lease = lease.from_environment()

    def routes(self) -> dict[str, Handler]:
        """``/messages/<topic>/<partition>/<offset>``: where a source message of this
        spout's partitions is (the API's "where is my message?")."""
        return {"/messages/": json_route(self.queries, self._where)}

    def _where(self, parts: list[str]) -> dict[str, Any] | None:
        if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts[1:]):
            raise ValueError("ask /messages/<topic>/<partition>/<offset>")
        got = self._route.get((parts[0], int(parts[1])))
        if got is None:
            return None
        task, src = got
        w, root, why = task.whereabouts(src, int(parts[2]))
        return {"component": self.s.component, "task": task.cfg.task, "state": w.state,
                "failures": w.failures, "since_ms": w.since_ms, "retry_ms": w.retry_ms,
                "root": None if root is None else f"{root:016x}", "last_failure": why}

    # ----- start-up -----------------------------------------------------

    def _setup(self, consumer: Any) -> None:
        from confluent_kafka import TopicPartition

        s = self.s
        edges = s.edge_list()
        all_tps = startup.source_partitions(s, consumer, self.results, self.acker, self.dlq)
        scheme = load_scheme(s.scheme, s.fields)
        assignment, results = [], []
        for task_id in s.tasks:
            sources = [tp for i, tp in enumerate(all_tps) if i % s.num_tasks == task_id]
            res_tp = TopicPartition(self.results, task_id)
            got = consumer.committed([TopicPartition(t, p) for t, p in sources] + [res_tp],
                                     timeout=30)
            committed = startup.start_offsets(s, consumer, sources,
                                              [c.offset for c in got[:-1]])
            res_start = max(got[-1].offset, 0)
            scan = scan_results(s.clients, self.results, task_id, res_start)
            salt = new_salt()
            # This incarnation's salt is in the results partition before any root derived from it.
            self._mark_salt(task_id, salt)
            cfg = SpoutConfig(task_id, s.component, scheme, edges, s.num_ackers, s.timeout_ms,
                              s.retry(), s.max_spout_pending, s.max_uncommitted_offsets,
                              s.guarantee)
            task = SpoutTask(cfg, committed, salt, scan.salts, scan.acked, lettered={
                (sources.index((t, p)), o) for t, p, o in scan.letters if (t, p) in sources},
                sources=[f"{t}:{p}" for t, p in sources])
            self.io[task_id] = TaskIO(task, sources, res_start)
            for i, tp in enumerate(sources):
                self._route[tp] = (task, i)
            assignment += [TopicPartition(t, p, o) for (t, p), o in
                           zip(sources, committed, strict=True)]
            results.append(TopicPartition(self.results, task_id, scan.end))
            log.info("spout task %d reads %s from %s (fetches wait up to %d ms); %d trees "
                     "acked before the restart", task_id, sources, committed,
                     s.fetch_wait_max_ms, len(scan.acked))
        consumer.assign(assignment)
        self.results_consumer.assign(results)

    def _mark_salt(self, task_id: int, salt: int) -> None:
        produce(self.producer, self.results, encode_salt_marker(salt, self.clock.now_ms()),
                      partition=task_id)

    # ----- the loop ------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        s = self.s
        # While start-up waits on Kafka, not in front of the first records.
        threading.Thread(target=startup.warm_up, daemon=True, name="warm-up").start()
        conf = {"error_cb": self._kafka_error}
        consumer = s.clients.consumer({**conf, "group.id": spout_group(s.topology, s.component),
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             # A wait that bounds the trees' round trip.
                             "fetch.wait.max.ms": s.fetch_wait_max_ms,
                             "fetch.min.bytes": s.fetch_min_bytes,
                             **startup.read_ahead(s.read_ahead_records, s.fetch_backoff_ms)})
        self.producer = s.clients.producer({**conf, "linger.ms": s.producer_linger_ms,
                                  "enable.idempotence": True,
                                  "queue.buffering.max.kbytes": 1 << 20})
        self.consumer = consumer
        self.results_consumer = s.clients.consumer({
            **conf, "group.id": spout_group(s.topology, s.component), "enable.auto.commit": False,
            "fetch.wait.max.ms": min(s.fetch_wait_max_ms, 20)})
        self._setup(consumer)
        self.producer.flush(30)
        last_commit = self.clock.now_ms()
        try:
            while not stop.is_set():
                if not self.lease.wait(stop):
                    break
                self._step(consumer, emit=True)
                now = self.clock.now_ms()
                if now - last_commit >= s.commit_interval_s * 1000 or self._caught_up():
                    self._commit()
                    last_commit = now
            self._drain(consumer)
        finally:
            self._commit()
            consumer.close()
            self.results_consumer.close()

    def _step(self, consumer: Any, emit: bool) -> None:
        self.queries.answer()
        # Wait on the sources while they may be read, else on the results.
        reading = emit and len(self._paused) < len(self._route)
        got = consume_ready(self.results_consumer, 1000, 0 if reading else 0.05)
        # After each wait, as it may have been a freeze: what was read is read again once
        # the lease is renewed, and nothing is acted on now.
        if not self.lease.holds():
            unread(self.results_consumer, got)
            return
        for m in got:
            if m.error():
                check_refused(m.error(), Operation.READ, m.topic() or self.results,
                              "reading its results")
                log.warning("consume error: %s", m.error())
            else:
                self._on_results(self.io[m.partition() or 0].task, m.value(),
                                 m.offset() or 0, self.clock.now_ms(), m.key())
        now = self.clock.now_ms()
        if emit:
            self._retry(now)
        wait = self._source_wait()
        msgs = consume_ready(consumer, self.s.max_poll_records, wait) if reading else []
        if not self.lease.holds():
            unread(consumer, msgs)
            return
        now = self.clock.now_ms()
        batches: dict[TP, list[Any]] = defaultdict(list)
        for m in msgs:
            if m.error():
                check_refused(m.error(), Operation.READ, m.topic() or "?",
                              "reading its source")
                log.warning("consume error: %s", m.error())
                continue
            batches[(m.topic(), m.partition())].append(m)
        for tp, ms in batches.items():
            task, src = self._route[tp]
            e = task.on_records(src, [m.offset() for m in ms], [m.value() for m in ms],
                                [kept.keep(m) for m in ms], now)
            self._emitted(task, e)
        for io in self.io.values():
            clock = self._acker_clock(io.task)
            if clock is not None:
                self._settled(io.task, io.task.expire(now, clock))
        self.letters.retry(self.producer)
        if emit:
            self._backpressure(consumer, now)
        self.producer.poll(0)

    def _retry(self, now: int) -> None:
        """Due retries, re-emitted from the messages the offset tables keep (no re-read)."""
        for io in self.io.values():
            task = io.task
            for src, offs in task.retries(now).items():
                held = [task.offsets[src].payload(o) for o in offs]
                self._emitted(task, task.on_records(
                    src, offs, [kept.value(k) for k in held], held, now, rewind=False))

    def _source_wait(self) -> float:
        """How long a step waits for source records: not at all when the trees in flight
        just settled (the loop commits next: a burst's end must not wait on an idle
        source), briefly while trees are in flight (their results come on the other
        consumer), else :data:`SOURCE_WAIT_S`."""
        if self._caught_up():
            return 0.0
        return SOURCE_WAIT_IN_FLIGHT_S if self._in_flight() else SOURCE_WAIT_S

    def _in_flight(self) -> bool:
        return any(io.task.pending for io in self.io.values())

    def _caught_up(self) -> bool:
        """Nothing in flight and a commit point moved: commit now, not at the interval."""
        tasks = [io.task for io in self.io.values()]
        return (not self._commit_failed and not any(t.pending for t in tasks)
                and any(t.commits() for t in tasks))

    def _drain(self, consumer: Any) -> None:
        """Deactivate: emit nothing more, let the trees in flight complete (bounded)."""
        from confluent_kafka import TopicPartition

        consumer.pause([TopicPartition(t, p) for io in self.io.values() for t, p in io.sources])
        self.producer.flush(10)
        deadline = time.monotonic() + min(self.s.message_timeout_s, 10.0)
        log.info("spout draining: %d trees in flight",
                 sum(io.task.pending for io in self.io.values()))
        while any(io.task.pending for io in self.io.values()) and time.monotonic() < deadline \
                and self.lease.holds():
            self._step(consumer, emit=False)

    # ----- effects ------------------------------------------------------

    def _on_results(self, task: SpoutTask, raw: bytes | None, offset: int, now: int,
                    key: bytes | None = None) -> None:
        if decode_salt_marker(raw or b"") is not None or \
                decode_letter_marker(raw or b"") is not None:
            return  # our own markers
        try:
            why = decode_fail_reasons(raw or b"")
            if why is not None:  # for the failed results that follow it
                self._reasons.add(why)
                return
            res = decode_results(raw or b"")
        except WireFormatError as e:
            log.error("bad result batch at %s[%d]@%d: %s", self.results, task.cfg.task, offset, e)
            self.listener.bad_results(task.cfg.task, f"{self.results}[{task.cfg.task}]@{offset}",
                                      str(e), now)
            return
        stamp = results_clock(raw or b"")
        if stamp >= 0 and key is not None:  # an acker task's timeout clock
            self._acker_clocks.setdefault(task.cfg.task, AckerClocks(task.cfg.num_ackers)
                                          ).stamp(key, stamp)
        self._settled(task, task.on_results(res, now, offset, self._reasons))
        if self._reasons:
            self._reasons.read(res.roots[res.outcomes != Outcome.ACKED].tolist())

    def _acker_clock(self, task: SpoutTask) -> int | None:
        """The ackers' timeout clock (the earliest of them), once every acker task told it:
        the backstop waits for slow bolts as the ackers' timeouts do."""
        if self.s.timeout_clock == "wall" or not task.cfg.tracked:
            return self.clock.now_ms()
        clocks = self._acker_clocks.get(task.cfg.task)
        return None if clocks is None else clocks.now()

    def _emitted(self, task: SpoutTask, e: Emission) -> None:
        if task.cfg.guarantee is Guarantee.AT_MOST_ONCE:
            # Commit before emit: a crash loses, never repeats. Mid-step, the consumer's
            # position is past records of this step not handed to the task yet.
            self._commit([task], passing=False)
        for topic, part, batch in e.tuples:
            for raw in encode_tuples_chunked(batch):
                produce(self.producer, topic, raw, partition=part)
        for p, raw in encode_acker_messages(e.inits, self.s.num_ackers):
            produce(self.producer, self.acker, raw, partition=p)
        for letter in e.letters:
            self._dead_letter(task, letter)
        self.listener.emitted(task.cfg.task, e.emitted, e.replayed, e.recovered,
                              len(e.letters), task.pending)

    def _settled(self, task: SpoutTask, st: Settled) -> None:
        self.listener.settled(st.acked, st.latencies_ms, st.failed, st.stale)
        for letter in st.letters:
            self._dead_letter(task, letter)

    def _dead_letter(self, task: SpoutTask, letter: Undeliverable) -> None:
        self.letters.write(self.producer, task, self.io[task.cfg.task].sources[letter.source],
                           letter)

    def _backpressure(self, consumer: Any, now: int) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        for task_id, io in self.io.items():
            task, sources = io.task, io.sources
            for src, off in task.take_seeks(now).items():
                t, p = sources[src]
                try:
                    consumer.seek(TopicPartition(t, p, off))
                except KafkaException as e:
                    log.warning("seek %s[%d] to %d failed (%s); will retry", t, p, off, e)
                    task.request_seek(src, off)
            blocked = task.blocked(now)
            want = {(task_id, s) for s in blocked}
            have = {k for k in self._paused if k[0] == task_id}
            if want - have:
                consumer.pause([TopicPartition(*sources[s]) for _, s in want - have])
                for k in want - have:
                    self._paused[k] = time.monotonic()
            if have - want:
                consumer.resume([TopicPartition(*sources[s]) for _, s in have - want])
                for k in have - want:
                    self.listener.unpaused(task_id, time.monotonic() - self._paused.pop(k))

    def _commit(self, tasks: list[SpoutTask] | None = None, passing: bool = True) -> None:
        """Commit the done prefixes, after everything produced so far is confirmed;
        ``passing``: every record consumed was handed to its task, so the consumer's
        positions say which offsets held none."""
        from confluent_kafka import KafkaException, TopicPartition

        if not self.lease.holds():
            self._commit_failed = True
            return
        consumer = self.consumer
        chosen = tasks or [io.task for io in self.io.values()]
        for task in chosen:
            # A restart scans results from the committed position: keep a salt marker past it.
            self._mark_salt(task.cfg.task, task.salt)
        left = self.producer.flush(10)
        if left:
            log.warning("%d messages not yet confirmed; commit postponed", left)
            self._commit_failed = True
            return
        offsets, done = [], []
        for task in chosen:
            io = self.io[task.cfg.task]
            # Past what the reader moved over without a record (transaction markers,
            # compaction): a partition that ends in one is committed to its end.
            if passing:
                at = consumer.position([TopicPartition(t, p) for t, p in io.sources])
                for src, tp in enumerate(at):
                    task.passed(src, tp.offset)
            for src, off in task.commits().items():
                t, p = io.sources[src]
                offsets.append(TopicPartition(t, p, off))
                done.append((task, src, off))
            pos = self.results_consumer.position(
                [TopicPartition(self.results, task.cfg.task)])[0].offset
            offsets.append(TopicPartition(self.results, task.cfg.task, task.results_position(
                pos if pos >= 0 else io.results_start)))
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            check_refused(e.args[0] if e.args else None, Operation.READ,
                          spout_group(self.s.topology, self.s.component),
                          "committing its offsets")
            log.warning("offset commit failed (will retry): %s", e)
            self._commit_failed = True
            return
        self._commit_failed = False
        for task, src, off in done:
            task.committed(src, off)
        # Every partition's gauges, committed or not this time: a stuck partition's lag must
        # grow while its offset stands still (the SquallPartitionStuck alert reads both).
        for task in chosen:
            for src, (t, p) in enumerate(self.io[task.cfg.task].sources):
                off = task.offsets[src].committed_offset
                _, high = consumer.get_watermark_offsets(TopicPartition(t, p), cached=True)
                self.listener.committed(
                    t, p, off, max(0, high - off) if high is not None and high >= 0 else None)

    def _kafka_error(self, err: Any) -> None:
        log.error("Kafka: %s", err)

