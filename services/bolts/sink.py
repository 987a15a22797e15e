"""The streaming sink that runs a bolt (``format("squall_bolt")``), on the executors.

Each micro-batch partition carries one bolt task's input tuple batches; the
sink runs the task's :class:`~squall.core.executor.BoltExecutor`, produces the
emitted tuples to the downstream edge topics and the coalesced acks to the
acker topic, and flushes before the micro-batch may commit. A micro-batch that
Spark runs again after a crash is skipped by a task that finished it, and failed
at once (its roots replayed by the spouts) by one that crashed while producing
(services/bolts/batch_marks.py).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from services.bolts import batch_marks, clients, guardian, resident
from services.bolts.isolation import run_isolated
from services.bolts.report import LAST_ERRORS, BatchReport, to_arrow
from services.bolts.runtime import heap
from services.bolts.source import TaskInput, logged_partitions, range_batch, read_task_input
from services.bolts.suspects import Suspects
from squall.core.chains import fused_edge
from squall.core.dead_letters import DeadLetterHeaders
from squall.core.errors import WireFormatError
from squall.core.exec_result import add_counts
from squall.core.records import AckerBatch
from squall.core.topics import acker_topic, dlq_topic, metrics_topic
from squall.core.topology import BoltSpec, TopologySpec
from squall.core.trident.spec import (
    STATEFUL,
)
from squall.core.tuple_batch import TupleBatch, decode_tuples, encode_tuples_chunked
from squall.core.wire import encode_acker_messages, encode_reason_messages
from squall.wallclock import SystemClock

log = logging.getLogger("squall.bolts")



class BoltSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "squall_bolt"

    def streamWriter(self, schema: StructType, overwrite: bool) -> BoltWriter:
        return BoltWriter(self.options)


class BoltWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.spec_json = options["topology"]
        self.component = options["component"]
        self.bootstrap = options["bootstrap"]
        self.run_id = options.get("run", "")
        self.state_url = options.get("state_url", "")
        self.marks = options.get("marks", "")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> BatchReport:
        from pyspark import TaskContext

        # Spark tells the write's tasks their micro-batch, as the foreachBatch path does.
        ctx = TaskContext.get()
        bid = ctx.getLocalProperty(SPARK_BATCH_PROPERTY) if ctx is not None else None
        urls = {self.component: self.state_url} if self.state_url else {}
        return run_chain(self.spec_json, (self.component,), self.bootstrap, iterator, urls,
                         self.marks, None if bid is None else int(bid))[0]

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        rep = BatchReport.merged(
            self.component, (m for m in messages if isinstance(m, BatchReport)))
        if rep.errors:
            log.warning("bolt %s batch %d: %d errors, last: %s", self.component, batchId,
                        rep.error_count, rep.errors[-1])
        # The micro-batch's numbers go to the bolts job's driver through Kafka: this method
        # runs in a Python worker of Spark's, not in the process that serves /metrics.
        try:
            spec = resident.spec_of(self.spec_json)
            producer = clients.producer(self.bootstrap)
            producer.produce(metrics_topic(spec.name), rep.to_json(self.run_id))
            producer.flush(5)
        except Exception as e:  # numbers are best effort; the batch itself is committed
            log.warning("bolt %s batch %d: report not sent: %s", self.component, batchId, e)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("bolt %s batch %d aborted; Spark will replay it", self.component, batchId)


def run_chain(spec_json: str, chain: Sequence[str], bootstrap: str,
              iterator: Iterable[pa.RecordBatch], state_urls: Mapping[str, str],
              marks_dir: str = "", batch_id: int | None = None) -> list[BatchReport]:
    """One task of a chain's head bolt over its micro-batch partition (the ranges the edge
    source planned: read here, :func:`services.bolts.source.read_task_input`), then the fused
    bolts (``squall.core.chains``) on what it emitted to them: execute, produce, flush.

    A stateful task's state is brought up to date before it runs and its changes are
    written right after it, to the database ``state_urls[component]`` (without one it
    stays in this worker). A persistent aggregate applies the batch to its database
    (``state_urls[component]`` unless its spec names one) under the task's next txid. One
    report per bolt of the chain, head first.
    """
    t0 = time.perf_counter()
    rows = list(iterator)
    t_rows = time.perf_counter()
    task = int(rows[0].column("task")[0].as_py()) if rows and rows[0].num_rows else -1
    if marks_dir and batch_id is not None and task >= 0 \
            and batch_marks.last_done(marks_dir, task) >= batch_id:
        log.warning("task %d of %s: micro-batch %s was run to the end before (Spark runs it "
                    "again after a crash): its outputs and acks are in Kafka, skipped",
                    task, chain[0], batch_id)
        return [BatchReport(task, component=c) for c in chain]
    return run_input(spec_json, chain, bootstrap, read_task_input(bootstrap, rows),
                     state_urls, marks_dir, batch_id, started=t0, rows_at=t_rows)


def run_input(spec_json: str, chain: Sequence[str], bootstrap: str, got: TaskInput,
              state_urls: Mapping[str, str], marks_dir: str = "",
              batch_id: int | None = None, started: float | None = None,
              rows_at: float | None = None) -> list[BatchReport]:
    """:func:`run_chain` on a task's records, read already (since ``started``; the ranges
    were there at ``rows_at``, then read from Kafka)."""
    t_input = time.perf_counter()
    t0 = t_input if started is None else started
    t_rows = t0 if rows_at is None else rows_at
    spec = resident.spec_of(spec_json)
    head, task = chain[0], got.task
    producer = clients.producer(bootstrap)
    reports = [BatchReport(task, component=c) for c in chain]
    reports[0].fetch_retries = got.retries
    reports[0].records = len(got.records)
    marking = bool(marks_dir) and batch_id is not None and task >= 0
    bid = batch_id or 0
    # A run of a batch this task began producing and did not finish: its first run's
    # acks may be in Kafka, and this run's would undo them (XOR).
    resent = marking and batch_marks.last_producing(marks_dir, task) == bid
    # Sent once every bolt of the chain has run: a process that dies in a bolt has sent
    # nothing of the micro-batch, and its next attempt runs it as if for the first time.
    out: list[Outgoing] = []
    batches = []
    for topic, part, off, raw in got.records:
        try:
            batches.append(decode_tuples(raw or b""))
        except WireFormatError as e:
            reports[0].bad += 1
            letter = DeadLetterHeaders(str(e), topic, part, off, 0, head)
            out.append((dlq_topic(spec.name), raw, {"headers": letter.headers()}))
    suspects = resident.suspects(marks_dir) if marks_dir else None
    # In sandboxes: a second attempt (the first died, maybe on a record that kills or hangs
    # its process; Spark counts a task's attempts, the marks a job's), or the replay of a
    # source message that did.
    again = batch_marks.mark_started(marks_dir, task, bid) if marking else 0
    isolate = _attempt() > 0 or again > 0 or \
        (suspects is not None and bool(suspects.rows(batches).any()))
    # The head's input comes in the same order at every attempt: the guardian's verdict on
    # a call that did not return names it for the next one (services/bolts/batch_marks.py).
    verdict = batch_marks.hung_path(marks_dir, task, bid) if marking else ""
    hung = batch_marks.hung(marks_dir, task, bid) if marking and isolate else None
    if task >= 0:
        inputs: dict[int, list[TupleBatch]] = {task: batches}
        for i, comp in enumerate(chain):
            fused = fused_edge(spec, comp, chain[i + 1]).topic if i + 1 < len(chain) else ""
            inputs = _run_component(spec, comp, inputs, fused, state_urls.get(comp, ""),
                                    bootstrap, out, reports[i], task, bid, isolate,
                                    suspects, *((verdict, hung) if i == 0 else ("", None)))
            if not inputs:
                break
    t_sent = time.perf_counter()
    if out:
        if marking and not resent:  # before the first message
            batch_marks.mark_producing(marks_dir, task, bid)
        for topic, value, kw in out:
            _produce(producer, topic, value, **kw)
    reports[0].phases["produce"] = reports[0].phases.get("produce", 0.0) + \
        time.perf_counter() - t_sent
    t_prod = time.perf_counter()
    _flush(producer, head, task)
    if resent and spec.ackers:
        _fail_roots(spec, producer, batches, head, task, bid)
    if marking:
        batch_marks.mark_done(marks_dir, task, bid)
    t_end = time.perf_counter()
    h = reports[0]
    # The head's own time: the fused bolts' is in their reports. Its phases add up to it:
    # execute is the rest of the chain's time (decoding, the head's tasks, and the chain's
    # steps between the timed ones, which a collection pausing there made 2.5 % of it).
    fused_s = sum(r.seconds for r in reports[1:])
    produce_s = h.phases.get("produce", 0.0)
    h.seconds = (t_end - t0) - fused_s
    h.phases = {"input": t_rows - t0, "read": t_input - t_rows,
                "execute": (t_prod - t_input) - produce_s - fused_s,
                "produce": produce_s, "flush": t_end - t_prod}
    heap.settle()
    return reports


def _run_component(spec: TopologySpec, component: str, inputs: Mapping[int, list[TupleBatch]],
                   fused_topic: str, state_url: str, bootstrap: str, out: list[Outgoing],
                   report: BatchReport, head_task: int, batch_id: int = 0,
                   isolate: bool = False, suspects: Suspects | None = None,
                   verdict: str = "", hung: tuple[int, float] | None = None
                   ) -> dict[int, list[TupleBatch]]:
    """Run ``component``'s tasks on their inputs, and add what they emit and their acks to
    ``out``, encoded; what goes to the fused bolt (``fused_topic``) is returned by its task
    instead.

    A fused bolt's task runs in every head task's partition, one at a time (its lock):
    each head starts on a different task (``head_task`` on, in turn), so that two heads
    run two tasks at once rather than queueing for the same one. No lock is held while
    another is waited for: a stateful bolt's turn ends with its task (its changes saved
    then, before the chain's flush; at least once, as its tuples), and a persistent
    aggregate's with its transaction.

    The bolt's calls run under the topology's deadline (services/bolts/guardian.py); with
    ``verdict``: where the guardian names the input of a call that does not return, and
    ``hung``, what it named on the last attempt (the head's tasks only). With
    ``isolate``, in parts in sandboxes instead (services/bolts/isolation.py), the query's
    ``suspects`` each in a part of its own, its culprits added to them."""
    bolt = spec.component(component)
    assert isinstance(bolt, BoltSpec)
    fused: dict[int, list[TupleBatch]] = {}
    run_s = prod_s = 0.0
    deadline = spec.deadline_s
    for task in rotated(sorted(inputs), head_task):
        t0 = time.perf_counter()
        label, watcher = f"bolt {component!r} task {task}, micro-batch {batch_id}", \
            guardian.guard()
        if bolt.cls in STATEFUL:  # its database's own timeouts bound it, not the deadline
            res = resident.aggregate(spec, bolt, task, state_url, bootstrap).run(inputs[task])
        else:
            with watcher.executing(label, deadline):  # building the bolt runs its prepare
                ex = resident.executor(spec, bolt, task, state_url)
            kv = resident.task_state(spec, bolt, ex, state_url, task)
            with kv.turn() if kv is not None else contextlib.nullcontext():
                if isolate:
                    fresh = functools.partial(resident.new_executor, spec, bolt, task,
                                              state_url)
                    res = run_isolated(ex, fresh, inputs[task], deadline, SystemClock().now_ms,
                                       suspects, hung)
                else:
                    with watcher.executing(label, deadline, verdict) as calls:
                        res = ex.run(inputs[task], calls)
        for warning in res.warnings:
            log.warning("task %d: %s", task, warning)
        t1 = time.perf_counter()
        for topic, part, batch in res.outputs:
            if topic == fused_topic:
                fused.setdefault(part, []).append(batch)
                continue
            out += [(topic, raw, {"partition": part}) for raw in encode_tuples_chunked(batch)]
        if spec.ackers:
            acks = acker_topic(spec.name)
            # Why roots failed goes before the fails: the acker keeps it for their results.
            out += [(acks, raw, {"partition": p})
                    for p, raw in encode_reason_messages(res.reasons, spec.ackers)]
            out += [(acks, raw, {"partition": p})
                    for p, raw in encode_acker_messages(res.acks, spec.ackers)]
        add_counts(report, res)
        report.error_count += len(res.errors)
        report.errors = (report.errors + res.errors)[-LAST_ERRORS:]
        run_s += t1 - t0
        prod_s += time.perf_counter() - t1
    report.phases = {"execute": run_s, "produce": prod_s}
    report.seconds = run_s + prod_s
    return fused


def rotated(tasks: Sequence[int], first: int) -> list[int]:
    """``tasks`` in turn from the ``first``-th (modulo their number) on."""
    k = first % len(tasks) if tasks else 0
    return [*tasks[k:], *tasks[:k]]


def _fail_roots(spec: TopologySpec, producer: Any, batches: Sequence[TupleBatch],
                component: str, task: int, batch_id: int) -> None:
    """Fail every root of the task's input, after this run's acks (then flushed): the
    spouts replay those trees now rather than when they time out."""
    roots = np.unique(np.concatenate(
        [np.empty(0, np.uint64)] + [b.all_roots() for b in batches]))
    if not roots.size:
        return
    fails = AckerBatch.fails(roots, SystemClock().now_ms())
    for p, raw in encode_acker_messages(fails, spec.ackers):
        _produce(producer, acker_topic(spec.name), raw, partition=p)
    _flush(producer, component, task)
    log.warning("task %d of %s: micro-batch %s is run again after a crash while it was "
                "producing; its first run's acks may be in Kafka, so its %d roots are "
                "failed now (the spouts replay them)", task, component, batch_id, roots.size)


def _flush(producer: Any, component: str, task: int) -> None:
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"{left} messages of bolt {component!r} task {task} were not "
                           "confirmed by Kafka; the micro-batch will be retried")


def task_runner(spec_json: str, chain: Sequence[str], bootstrap: str,
                state_urls: Mapping[str, str] | None = None, marks_dir: str = "",
                batch_id: int | None = None
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """For ``mapInArrow`` over the edge source's partitions (a micro-batch the driver cannot
    plan from the offset log): run the partition's chain task, yield a report row per bolt.

    With ``marks_dir`` and ``batch_id``, a batch the task finished already is skipped
    (services/bolts/batch_marks.py)."""
    urls = dict(state_urls or {})

    def run(iterator: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reps = run_chain(spec_json, chain, bootstrap, iterator, urls, marks_dir, batch_id)
        yield to_arrow(reps)

    return run


#: The Spark local property that tells the tasks their micro-batch (set by the driver on
#: the job's thread; Spark hands local properties to every task of the job).
BATCH_PROPERTY = "squall.batch"
#: The one Spark's micro-batch execution sets itself (``MicroBatchExecution.BATCH_ID_KEY``),
#: seen by the writer sink's tasks.
SPARK_BATCH_PROPERTY = "streaming.sql.batchId"


def logged_runner(spec_json: str, chain: Sequence[str], bootstrap: str,
                  state_urls: Mapping[str, str], checkpoint: str, topics: Sequence[str],
                  tasks: int, executors: int
                  ) -> Callable[[Iterable[int]], Iterator[BatchReport]]:
    """For ``mapPartitions`` over ``parallelize(range(executors), executors)``, one RDD
    for every micro-batch: Spark task ``i`` learns its micro-batch from
    :data:`BATCH_PROPERTY`, plans the ranges of the bolt tasks it runs (those
    ``t % executors == i``, in turn, as a Storm executor runs its tasks) from Spark's
    offset log (:func:`services.bolts.source.logged_partitions`), runs them and returns
    their reports. Nothing of the batch is in the function, so the driver plans the job
    once, not per batch."""
    def each(executor_ids: Iterable[int]) -> Iterator[BatchReport]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        prop = ctx.getLocalProperty(BATCH_PROPERTY) if ctx is not None else None
        if prop is None:
            raise RuntimeError(f"the task was not told its micro-batch ({BATCH_PROPERTY})")
        bid = int(prop)
        marks = batch_marks.beside(Path(checkpoint))
        urls = dict(state_urls)
        for i in executor_ids:
            mine = [t for t in range(tasks) if t % executors == i]
            parts = logged_partitions(Path(checkpoint), bid, topics, mine)
            if parts is None:
                raise RuntimeError(f"micro-batch {bid}: Spark's offset log in {checkpoint} "
                                   "cannot be read by this task")
            for p in parts:
                yield from run_chain(spec_json, chain, bootstrap,
                                     [range_batch(p.task, p.ranges)], urls, marks, bid)

    return each


def _attempt() -> int:
    """Which attempt at its task this is, as Spark counts them (0: the first; 0 outside
    Spark)."""
    from pyspark import TaskContext as SparkTask

    ctx = SparkTask.get()
    return int(ctx.attemptNumber()) if ctx is not None else 0


#: A message the micro-batch sends: topic, value, and how (partition, headers).
Outgoing = tuple[str, bytes | None, dict[str, Any]]


def _produce(producer: Any, topic: str, value: bytes | None, **kw: Any) -> None:
    from squall.kafka import produce

    produce(producer, topic, value, **kw)
