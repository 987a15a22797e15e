"""Running a micro-batch's bolt tasks, on the executors.

Each Spark task of the micro-batch's job (:func:`planned_job`) runs the bolt tasks
it owns, one after the other as a Storm executor does: for each, it reads the task's
edge records (services/bolts/edges.py), runs the chain's head bolt and then the bolts
fused to it (``squall.core.topology.chains``) in that task's
:class:`~squall.core.tasks.executor.BoltExecutor`, produces what they emitted to the
downstream edge topics and their coalesced acks to the acker topic, and flushes before
the micro-batch may commit. A micro-batch that Spark runs again after a crash is skipped
by a task that finished it, and failed at once (its roots replayed by the spouts) by one
that crashed while producing (services/bolts/batch_marks.py).
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

from services.bolts import batch_marks, clients, guardian, resident
from services.bolts.edges import TaskInput, read_task_input
from services.bolts.isolation import run_isolated
from services.bolts.kafka_fence import executor_fence
from services.bolts.planning import TaskPartition, logged_partitions
from services.bolts.report import LAST_ERRORS, BatchReport
from services.bolts.runtime import heap
from services.bolts.suspects import Suspects
from squall.core.bolt_api.metrics import MetricsDelta
from squall.core.errors import WireFormatError
from squall.core.reliability.dead_letters import DeadLetterHeaders
from squall.core.reliability.records import AckerBatch
from squall.core.tasks.exec_result import add_counts
from squall.core.topology.chains import fused_edge
from squall.core.topology.kafka_sink import KAFKA_BOLT
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.ticks import tick_routes
from squall.core.topology.topics import acker_topic, dlq_topic
from squall.core.topology.trident import STATEFUL
from squall.core.wire.internal import encode_acker_messages, encode_reason_messages
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples_chunked
from squall.wallclock import SystemClock

log = logging.getLogger("squall.bolts")

#: The Spark local property that tells the tasks their micro-batch (set by the driver on
#: the job's thread; Spark hands local properties to every task of the job).
BATCH_PROPERTY = "squall.batch"
#: How long a task waits for Kafka to confirm its messages, in slices of FLUSH_SLICE_S.
FLUSH_S, FLUSH_SLICE_S = 60.0, 1.0
#: A message the micro-batch sends: topic, value, and how (partition, headers).
Outgoing = tuple[str, bytes | None, dict[str, Any]]


def planned_job(sc: Any, spec_json: str, chain: tuple[str, ...], bootstrap: str,
                state_urls: Mapping[str, str], checkpoint: Path, topics: Sequence[str],
                tasks: int, executors: int) -> Any:
    """The one RDD job every micro-batch of a chain runs: one Spark task per executor,
    each running its bolt tasks (:func:`batch_tasks`) on the ranges it plans from the
    offset log. Planned once: a job planned per batch costs more, and a Spark SQL job
    (``mapInArrow``) more than the RDD job (``benchmarks/handoff.py`` measures it)."""
    return sc.parallelize(range(executors), executors).mapPartitions(
        batch_tasks(spec_json, chain, bootstrap, state_urls, str(checkpoint), topics, tasks,
                    executors))


def batch_tasks(spec_json: str, chain: Sequence[str], bootstrap: str,
                state_urls: Mapping[str, str], checkpoint: str, topics: Sequence[str],
                tasks: int, executors: int
                ) -> Callable[[Iterable[int]], Iterator[BatchReport]]:
    """For ``mapPartitions`` over ``parallelize(range(executors), executors)``, one RDD
    for every micro-batch: Spark task ``i`` learns its micro-batch from
    :data:`BATCH_PROPERTY`, plans the ranges of the bolt tasks it runs (those
    ``t % executors == i``, in turn, as a Storm executor runs its tasks) from Spark's
    offset log, runs them and returns their reports. Nothing of the batch is in the
    function, so the driver plans the job once, not per batch."""
    def each(executor_ids: Iterable[int]) -> Iterator[BatchReport]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        prop = ctx.getLocalProperty(BATCH_PROPERTY) if ctx is not None else None
        if prop is None:
            raise RuntimeError(f"the task was not told its micro-batch ({BATCH_PROPERTY})")
        bid = int(prop)
        marks = batch_marks.beside(Path(checkpoint))
        for i in executor_ids:
            for task in (t for t in range(tasks) if t % executors == i):
                started = time.perf_counter()
                parts = logged_partitions(Path(checkpoint), bid, topics, [task])
                if parts is None:
                    raise RuntimeError(f"micro-batch {bid}: Spark's offset log in "
                                       f"{checkpoint} cannot be read by this task")
                for part in parts:
                    yield from run_chain(spec_json, chain, bootstrap, part, state_urls,
                                         marks, bid, started)

    return each


def run_chain(spec_json: str, chain: Sequence[str], bootstrap: str, part: TaskPartition,
              state_urls: Mapping[str, str], marks_dir: str = "",
              batch_id: int | None = None, started: float | None = None
              ) -> list[BatchReport]:
    """One task of a chain's head bolt over its ranges of a micro-batch (read here), then
    the fused bolts on what it emitted to them: execute, produce, flush. ``started``: when
    the task began planning its ranges.

    A stateful task's state is brought up to date before it runs and its changes are
    written right after it, to the database ``state_urls[component]`` (without one it
    stays in this worker). A persistent aggregate applies the batch to its database
    (``state_urls[component]`` unless its spec names one) under the task's next txid. One
    report per bolt of the chain, head first.
    """
    laps = Laps(time.perf_counter() if started is None else started)
    laps.lap("input")
    marking = bool(marks_dir) and batch_id is not None
    attempt = batch_marks.begin(marks_dir, part.task, batch_id or 0) if marking else None
    if attempt is not None and attempt.finished:
        log.warning("task %d of %s: micro-batch %s was run to the end before (Spark runs it "
                    "again after a crash): its outputs and acks are in Kafka, skipped",
                    part.task, chain[0], batch_id)
        return [BatchReport(part.task, component=c) for c in chain]
    got = read_task_input(bootstrap, part)
    laps.lap("read")
    return run_input(spec_json, chain, bootstrap, got, state_urls, marks_dir,
                     batch_id or 0, attempt, laps)


def run_input(spec_json: str, chain: Sequence[str], bootstrap: str, got: TaskInput,
              state_urls: Mapping[str, str], marks_dir: str, batch_id: int,
              attempt: batch_marks.Attempt | None, laps: Laps) -> list[BatchReport]:
    """:func:`run_chain` on a task's records, read already."""
    spec = resident.spec_of(spec_json)
    head, task = chain[0], got.task
    reports = [BatchReport(task, component=c) for c in chain]
    reports[0].fetch_retries, reports[0].records = got.retries, len(got.records)
    # Sent once every bolt of the chain has run: a process that dies in a bolt has sent
    # nothing of the micro-batch, and its next attempt runs it as if for the first time.
    out: list[Outgoing] = []
    batches = _decode(spec, head, got, out, reports[0])
    # Ticks to the bolts fused behind the head: handed to their tasks after the head's
    # emits (squall/core/topology/ticks.py). One to a bolt no longer in the chain (the
    # topology changed) is dropped: ticks are not tracked.
    ticks: dict[str, list[TupleBatch]] = {}
    if any(b.to for b in batches):
        for b in batches:
            if b.to in chain[1:]:
                ticks.setdefault(b.to, []).append(b)
        batches = [b for b in batches if not b.to]
    suspects = resident.suspects(marks_dir) if marks_dir else None
    again = attempt.start() if attempt is not None else 0
    # In sandboxes: a second attempt (the first died, maybe on a record that kills or hangs
    # its process; Spark counts a task's attempts, the marks a job's), or the replay of a
    # source message that did.
    isolate = _attempt() > 0 or again > 0 or \
        (suspects is not None and bool(suspects.rows(batches).any()))
    # The head's input comes in the same order at every attempt: the guardian's verdict on
    # a call that did not return names it for the next one (services/bolts/batch_marks.py).
    verdict, hung = (attempt.verdict, attempt.hung() if isolate else None) if attempt \
        else ("", None)
    inputs: dict[int, list[TupleBatch]] = {task: batches}
    for i, comp in enumerate(chain):
        mine = ticks.pop(comp, [])
        if mine:
            share = tick_routes(spec.component(head).parallelism,
                                spec.component(comp).parallelism).get(task, [])
            for t in share:
                inputs.setdefault(t, []).extend(mine)
        fused = fused_edge(spec, comp, chain[i + 1]).topic if i + 1 < len(chain) else ""
        inputs = _run_component(spec, comp, inputs, fused, state_urls.get(comp, ""),
                                bootstrap, out, reports[i], task, batch_id, isolate,
                                suspects, *((verdict, hung) if i == 0 else ("", None)))
        if not inputs and not ticks:
            break
    # The head's execute phase is the chain's time less the fused bolts' own.
    laps.lap("execute", minus=sum(r.seconds for r in reports[1:]))
    producer = clients.producer(bootstrap)
    if out:
        if attempt is not None and not attempt.resent:  # before the first message
            attempt.producing()
        for topic, value, kw in out:
            _produce(producer, topic, value, **kw)
    laps.lap("produce")
    _flush(producer, head, task, bootstrap)
    if attempt is not None:
        if attempt.resent and spec.ackers:
            _fail_roots(spec, producer, batches, head, task, batch_id, bootstrap)
        attempt.done()
    laps.lap("flush")
    reports[0].phases = laps.phases(reports[0].phases.get("produce", 0.0))
    reports[0].seconds = sum(reports[0].phases.values())
    heap.settle()
    return reports


class Laps:
    """The head task's time by phase: each lap runs from the previous one's end."""

    def __init__(self, start: float) -> None:
        self._last, self._laps = start, dict[str, float]()

    def lap(self, phase: str, minus: float = 0.0) -> None:
        now = time.perf_counter()
        self._laps[phase] = self._laps.get(phase, 0.0) + now - self._last - minus
        self._last = now

    def phases(self, producing: float) -> dict[str, float]:
        """The laps, with ``producing`` (the head's own produce time, measured while it
        executed) moved from execute to produce."""
        out = dict(self._laps)
        out["execute"] = out.get("execute", 0.0) - producing
        out["produce"] = out.get("produce", 0.0) + producing
        return out


def _decode(spec: TopologySpec, head: str, got: TaskInput, out: list[Outgoing],
            report: BatchReport) -> list[TupleBatch]:
    """The task's records as tuple batches; one that is not a tuple batch goes to the
    dead letters, saying why, and is counted as bad."""
    batches = []
    for topic, part, off, raw in got.records:
        try:
            batches.append(decode_tuples(raw or b""))
        except WireFormatError as e:
            report.bad += 1
            letter = DeadLetterHeaders(str(e), topic, part, off, 0, head)
            out.append((dlq_topic(spec.name), raw, {"headers": letter.headers()}))
    return batches


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
            res = resident.run_aggregate(spec, bolt, task, state_url, bootstrap, inputs[task])
        elif bolt.cls == KAFKA_BOLT:  # Kafka's own timeouts bound it
            res = resident.kafka_sink(spec, bolt, task, state_url, bootstrap).run(inputs[task])
        else:
            with watcher.executing(label, deadline):  # building the bolt runs its prepare
                ex = resident.executor(spec, bolt, task, state_url)
            kv = resident.task_state(spec, bolt, ex, state_url, task)
            try:
                with kv.turn() if kv is not None else contextlib.nullcontext():
                    if isolate:
                        fresh = functools.partial(resident.new_executor, spec, bolt, task,
                                                  state_url)
                        res = run_isolated(ex, fresh, inputs[task], deadline,
                                           SystemClock().now_ms, suspects, hung)
                    else:
                        with watcher.executing(label, deadline, verdict) as calls:
                            res = ex.run(inputs[task], calls)
            except Exception as e:
                resident.task_state_lost(ex, e)
                raise
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
        if res.user:
            report.user.setdefault(task, MetricsDelta()).add(res.user)
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
                component: str, task: int, batch_id: int, bootstrap: str) -> None:
    """Fail every root of the task's input, after this run's acks (then flushed): the
    spouts replay those trees now rather than when they time out."""
    roots = np.unique(np.concatenate(
        [np.empty(0, np.uint64)] + [b.all_roots() for b in batches]))
    if not roots.size:
        return
    fails = AckerBatch.fails(roots, SystemClock().now_ms())
    for p, raw in encode_acker_messages(fails, spec.ackers):
        _produce(producer, acker_topic(spec.name), raw, partition=p)
    _flush(producer, component, task, bootstrap)
    log.warning("task %d of %s: micro-batch %s is run again after a crash while it was "
                "producing; its first run's acks may be in Kafka, so its %d roots are "
                "failed now (the spouts replay them)", task, component, batch_id, roots.size)


def _flush(producer: Any, component: str, task: int, bootstrap: str) -> None:
    """Wait for Kafka to confirm every message sent, up to ``FLUSH_S``, and give up sooner
    if this executor is cut off from Kafka (services/bolts/kafka_fence.py)."""
    fence = executor_fence(bootstrap)
    began = time.monotonic()
    while (left := producer.flush(FLUSH_SLICE_S)) and time.monotonic() - began < FLUSH_S:
        if fence is not None:
            fence.waiting(f"{left} messages of bolt {component!r} task {task} to be confirmed")
    if left:
        raise RuntimeError(f"{left} messages of bolt {component!r} task {task} were not "
                           f"confirmed by Kafka in {FLUSH_S:g} s; the micro-batch will be "
                           "retried")
    if fence is not None:
        fence.answered()


def _attempt() -> int:
    """Which attempt at its task this is, as Spark counts them (0: the first; 0 outside
    Spark)."""
    from pyspark import TaskContext as SparkTask

    ctx = SparkTask.get()
    return int(ctx.attemptNumber()) if ctx is not None else 0


def _produce(producer: Any, topic: str, value: bytes | None, **kw: Any) -> None:
    from squall.kafka import produce

    produce(producer, topic, value, **kw)
