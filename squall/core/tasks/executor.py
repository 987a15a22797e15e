"""Runs one bolt task over a micro-batch of tuple batches (no Spark, no Kafka).

Given the input batches of a micro-batch, it calls the user's bolt, keeps
Storm's anchoring arithmetic (:class:`~squall.core.reliability.tuples.Anchoring`), routes the
emitted tuples to the partitions of every subscribed edge, and returns them
with the XOR-coalesced ack records. The Spark job only moves bytes around it.

An exception in user code fails that input (a fast replay) and is kept as the
component's last error; it never stops the job.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from squall.core.bolt_api.bolt import BasicBolt, BatchBolt, Bolt, TaskContext
from squall.core.bolt_api.state import KeyValueState
from squall.core.bolt_api.windowed import WindowedBolt, WindowedOutputCollector
from squall.core.errors import TopologyError
from squall.core.reliability.clock import Clock
from squall.core.reliability.ids import IdBatcher, new_id
from squall.core.reliability.records import AckerBatch, AckerRecord, RecordKind
from squall.core.reliability.tuples import DEFAULT_STREAM, TICK_STREAM, Anchoring, Tuple
from squall.core.tasks.collector import TaskCollector
from squall.core.tasks.column_runs import (
    basic_in_columns,
    called,
    run_basic,
    run_batch_bolt,
    single_anchored,
)
from squall.core.tasks.emits import EdgeBuffer, child_lineage, plans, slot_of
from squall.core.tasks.exec_result import CallWatch, ExecResult
from squall.core.tasks.scratch import ScratchWatch
from squall.core.tasks.window_runs import run_windows
from squall.core.tasks.windows import WindowManager
from squall.core.topology.grouping import Edge, Grouping
from squall.core.topology.windows import window_of
from squall.core.wire.columns import to_columns
from squall.core.wire.tuple_batch import TupleBatch


class BoltExecutor:
    """One task of one bolt component."""

    def __init__(self, bolt: Bolt | BatchBolt | WindowedBolt, context: TaskContext,
                 edges: Sequence[Edge], conf: Mapping[str, Any] | None = None,
                 ids: Callable[[], int] = new_id, *, clock: Clock,
                 outputs: Mapping[str, Sequence[str]] | None = None,
                 inputs: Sequence[str] = (), message_timeout_s: float = 30.0) -> None:
        """``inputs``: the bolt's input streams as ``component/stream`` (a window's event
        time waits for each); ``message_timeout_s``: the topology's (a window resets the
        timeouts of the trees it holds within it)."""
        self.bolt = bolt
        self.clock = clock
        self.context = context
        # The topology's declaration wins over the class's (a spec may name other fields).
        self.outputs = {s: tuple(f) for s, f in (
            bolt.outputs if outputs is None else outputs).items()}
        self._anch = Anchoring(ids)
        #: edge ids drawn for a batch at once (squall/core/tasks/column_runs.py)
        self.batch_ids = IdBatcher()
        #: per declared stream, its subscribers' buffers (squall/core/tasks/emits.py)
        self.plans = plans(self.outputs, edges, context.component, context.task)
        self._collector: TaskCollector | None = None
        self.result = ExecResult()
        #: the task's keyed state, if the bolt is stateful or windowed (the caller keeps it
        #: current)
        self.state: KeyValueState | None = None
        self._windows: tuple[WindowManager, WindowedOutputCollector] | None = None
        where = f"bolt {context.component!r}"
        window = window_of(conf or {}, where)
        if isinstance(bolt, WindowedBolt):
            if window is None:
                raise TopologyError(f"{where} is a windowed bolt without a window: set "
                                    "its length (with_window, or topology.bolts.window."
                                    "length.count / .duration.ms in its config)")
            self.state = KeyValueState()
            collector = WindowedOutputCollector(self)
            self._windows = (WindowManager(window, self.state, inputs), collector)
            self._timeout_ms = round(message_timeout_s * 1000)
            bolt.prepare(conf or {}, context, collector)
        elif window is not None:
            raise TopologyError(f"{where} has a window in its config but its class "
                                f"{type(bolt).__name__} is not a WindowedBolt")
        elif isinstance(bolt, Bolt):
            self._collector = TaskCollector(self, self.plans, self._anch)
            bolt.prepare(conf or {}, context, self._collector)
        else:
            bolt.prepare(conf or {}, context)
        if not isinstance(bolt, WindowedBolt) and bolt.stateful:
            self.state = KeyValueState()
            bolt.init_state(self.state)
        self._scratch = ScratchWatch(bolt, context.component)

    # ----- the collector's side ---------------------------------------------

    def emit(self, stream: str, values: Sequence[Any], anchors: list[Tuple],
             direct: int | None) -> None:
        plan = self.plans.get(stream)
        if plan is None:
            raise TopologyError(f"emit on undeclared stream {stream!r}")
        if len(values) != len(plan.fields):
            raise TopologyError(f"emit of {len(values)} values on stream {stream!r} declared "
                                f"with fields {list(plan.fields)}")
        if plan.only is not None and direct is None:
            # One subscriber routed at the flush: one copy.
            child = self._anch.child_of(anchors)
            plan.only.rows.append((values, child, None, *slot_of(anchors)))
            self.result.emitted += 1
            return
        if not plan.buffers:  # no subscriber: only the child's place in its tree is taken
            slot_of(anchors)
            self.result.emitted += 1
            return
        # A custom grouping chooses now, before anything is buffered: if it fails, the
        # bolt's execute raises and its input fails.
        chosen = {id(b): b.router.choose(values) for b in plan.buffers if b.router.custom}
        children = iter(self._anch.emit(anchors, plan.copies))
        # A child descends from its first anchor's source message (exact state's key).
        origin, lineage = slot_of(anchors)
        for b in plan.buffers:
            g = b.edge.grouping
            if g is Grouping.ALL:
                for p in range(b.edge.partitions):
                    b.rows.append((values, next(children), p, origin, lineage))
                continue
            if g is Grouping.DIRECT and direct is None:
                raise TopologyError(f"stream {stream!r} is direct-grouped to {b.edge.target!r}: "
                                    "use emit_direct")
            b.rows.append((values, next(children),
                           direct if g is Grouping.DIRECT else chosen.get(id(b)), origin,
                           lineage))
        self.result.emitted += 1

    def ack(self, t: Tuple) -> None:
        res = self.result
        if self._anch.ack_into(t, res.ack_roots, res.ack_values):
            res.acked += 1

    def fail(self, t: Tuple) -> None:
        if not t.settled:
            self.result.records += self._anch.fail(t)
            self.result.failed += 1

    def children_so_far(self, t: Tuple) -> None:
        """Put ``t``'s children into its trees now, leaving it pending (a window's)."""
        self.result.records += self._anch.children_so_far(t)

    def reset_timeout(self, t: Tuple) -> None:
        self.result.records += self._anch.reset_timeout(t)

    def report_error(self, error: BaseException | str) -> None:
        self.result.errors.append(_describe(error))

    def failed_by(self, error: BaseException | str, roots: Iterable[int]) -> None:
        """``error`` kept as the component's last error and as why ``roots`` failed."""
        why = _describe(error)
        self.result.errors.append(why)
        reasons = self.result.reasons
        for r in roots:
            reasons.setdefault(r, f"bolt {self.context.component!r} raised {why}")

    # ----- a micro-batch -----------------------------------------------------

    def run(self, batches: Sequence[TupleBatch], watch: CallWatch | None = None) -> ExecResult:
        """``watch``: told of each call into the bolt."""
        self.result = ExecResult()
        if self._collector is not None:
            self._collector.result = self.result
        bolt = self.bolt
        if isinstance(bolt, BatchBolt):  # ticks reach execute, which it has not
            batches = [b for b in batches if b.stream != TICK_STREAM]
        if isinstance(bolt, BatchBolt) and batches and single_anchored(batches):
            out = run_batch_bolt(self, bolt, batches, watch)
            out.warnings += self._scratch.check()
            out.user = self.context.metrics.take()
            return out
        tuples = [t for b in batches for t in b.tuples()]
        acks = None
        if self._windows is not None:
            assert isinstance(bolt, WindowedBolt)
            run_windows(self, bolt, *self._windows, tuples, watch, self._timeout_ms)
        elif isinstance(bolt, BasicBolt) and basic_in_columns(bolt, self.plans.get(
                DEFAULT_STREAM)) and tuples and single_anchored(batches):
            acks = run_basic(self, bolt, batches, tuples, watch)
        elif isinstance(bolt, Bolt):
            self._run_tuples(bolt, tuples, watch)
        elif isinstance(bolt, BatchBolt):
            self._run_batch(bolt, batches, tuples, watch)
        self.result.warnings += self._scratch.check()
        self.result.user = self.context.metrics.take()
        return self._flush(acks)

    def _run_tuples(self, bolt: Bolt, tuples: list[Tuple], watch: CallWatch | None) -> None:
        self.result.executed += len(tuples)
        execute = bolt.execute
        if watch is None:
            for t in tuples:
                try:
                    execute(t)
                except Exception as e:  # user code: fail the input, keep going
                    self.failed_by(e, t.roots)
                    self.fail(t)
            return
        for i, t in enumerate(tuples):
            watch.enter(i)
            try:
                execute(t)
            except Exception as e:
                self.failed_by(e, t.roots)
                self.fail(t)
            watch.leave()

    def _run_batch(self, bolt: BatchBolt, batches: Sequence[TupleBatch],
                   tuples: list[Tuple], watch: CallWatch | None) -> None:
        self.result.executed += len(tuples)
        if not tuples:
            return
        try:
            out = called(bolt, batches, len(tuples), watch)
            parents = out.parents.tolist()
            stream_col = out.streams.tolist() if out.streams is not None else None
            cols: dict[str, list[Any]] = {}
            for fields in self.outputs.values():
                for f in fields:
                    if f not in cols:
                        if not out.has(f):
                            raise TopologyError(f"batch bolt output lacks declared field {f!r}")
                        cols[f] = out.values(f)
            for i, parent in enumerate(parents):
                stream = stream_col[i] if stream_col else DEFAULT_STREAM
                fields = self.outputs[stream]
                self.emit(stream, [cols[f][i] for f in fields], [tuples[parent]], None)
        except Exception as e:
            self.failed_by(e, [r for t in tuples for r in t.roots])
            for t in tuples:
                self.fail(t)
            return
        for t in tuples:
            self.ack(t)

    def _flush(self, acks: AckerBatch | None = None) -> ExecResult:
        """``acks``: the acks and fails a run made in columns."""
        res = self.result
        for plan in self.plans.values():
            for b in plan.buffers:
                if b.rows:
                    self._flush_buffer(plan.fields, b, res)
        now = self.clock.now_ms()
        res.acks = AckerBatch.concat([AckerBatch.from_records(res.records, now),
                                      AckerBatch.acks(res.ack_roots, res.ack_values, now),
                                      *([] if acks is None else [acks])]).coalesced()
        return res

    def _flush_buffer(self, fields: tuple[str, ...], b: EdgeBuffer, res: ExecResult) -> None:
        """A buffer's rows as one batch of columns, then a slice per target partition."""
        rows, b.rows = b.rows, []
        values = [r[0] for r in rows]
        fixed = [r[2] for r in rows]
        free = [i for i, p in enumerate(fixed) if p is None]  # routed now, on their values
        if len(free) == len(rows):
            parts = b.router.route(values)  # per row (a column's type may differ from a row's)
        else:  # all, direct, custom: chosen at the emit
            parts = np.array([-1 if p is None else p for p in fixed], np.int64)
            if free:
                parts[free] = b.router.route([values[i] for i in free])
        cols, bad = to_columns(fields, values)
        if bad:
            for k, reason in bad.items():
                # A value that cannot share its column fails its trees, like an exception
                # in the bolt would: the batch and the process go on.
                res.records += [AckerRecord(RecordKind.FAIL, r) for r in rows[k][1]]
                self.failed_by(f"emitted on stream {b.edge.stream!r}: {reason}", rows[k][1])
            good = np.array([k not in bad for k in range(len(rows))])
            rows, parts = [r for k, r in enumerate(rows) if k not in bad], parts[good]
            if not rows:
                return
        batch = TupleBatch.from_columns(
            cols, [r[1] for r in rows], stream=b.edge.stream, source=self.context.component,
            source_task=self.context.task, origins=[r[3] for r in rows],
            lineage_columns=child_lineage([r[4] for r in rows]))
        targets = np.flatnonzero(np.bincount(parts, minlength=b.edge.partitions)).tolist()
        for p in targets:
            res.outputs.append((b.edge.topic, p, batch if len(targets) == 1 else
                                batch.select(np.flatnonzero(parts == p))))


def _describe(error: BaseException | str) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return error
