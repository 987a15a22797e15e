"""Runs one bolt task over a micro-batch of tuple batches (no Spark, no Kafka).

Given the input batches of a micro-batch, it calls the user's bolt, keeps
Storm's anchoring arithmetic (:class:`~squall.tuples.Anchoring`), routes the
emitted tuples to the partitions of every subscribed edge, and returns them
with the XOR-coalesced ack records. The Spark job only moves bytes around it.

An exception in user code fails that input (a fast replay) and is kept as the
component's last error; it never stops the job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa

from squall.bolt import PARENT, BatchBolt, Bolt, OutputCollector, TaskContext
from squall.errors import TopologyError
from squall.grouping import Edge, Grouping, Router
from squall.ids import new_id
from squall.records import AckerRecord
from squall.tuples import DEFAULT_STREAM, Anchoring, Tuple, coalesce
from squall.wire import RESERVED, TupleBatch

log = logging.getLogger("squall.executor")


@dataclass
class ExecResult:
    outputs: list[tuple[str, int, TupleBatch]] = field(default_factory=list)
    acks: list[AckerRecord] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    executed: int = 0
    emitted: int = 0
    acked: int = 0
    failed: int = 0


@dataclass
class _EdgeBuffer:
    edge: Edge
    router: Router
    rows: list[Sequence[Any]] = field(default_factory=list)
    anchors: list[dict[int, int]] = field(default_factory=list)
    parts: list[int | None] = field(default_factory=list)  # fixed partition (all / direct)


class BoltExecutor:
    """One task of one bolt component."""

    def __init__(self, bolt: Bolt | BatchBolt, context: TaskContext, edges: Sequence[Edge],
                 conf: Mapping[str, Any] | None = None, ids: Callable[[], int] = new_id) -> None:
        self.bolt = bolt
        self.context = context
        self.outputs = {s: tuple(f) for s, f in bolt.outputs.items()}
        self._anch = Anchoring(ids)
        self._edges: dict[str, list[_EdgeBuffer]] = {}
        for e in edges:
            fields = self.outputs.get(e.stream)
            if fields is None:
                raise TopologyError(f"bolt {context.component!r} declares no stream {e.stream!r} "
                                    f"for its subscriber {e.target!r}")
            self._edges.setdefault(e.stream, []).append(
                _EdgeBuffer(e, Router.for_edge(e, fields)))
        self._result = ExecResult()
        if isinstance(bolt, Bolt):
            bolt.prepare(conf or {}, context, OutputCollector(self))
        else:
            bolt.prepare(conf or {}, context)

    # ----- the collector's side ---------------------------------------------

    def emit(self, stream: str, values: Sequence[Any], anchors: list[Tuple],
             direct: int | None) -> None:
        fields = self.outputs.get(stream)
        if fields is None:
            raise TopologyError(f"emit on undeclared stream {stream!r}")
        if len(values) != len(fields):
            raise TopologyError(f"emit of {len(values)} values on stream {stream!r} declared "
                                f"with fields {list(fields)}")
        buffers = self._edges.get(stream, [])
        copies = sum(b.edge.copies for b in buffers)
        child = iter(self._anch.emit(anchors, copies))
        for b in buffers:
            g = b.edge.grouping
            if g is Grouping.ALL:
                for p in range(b.edge.partitions):
                    b.rows.append(values)
                    b.anchors.append(next(child))
                    b.parts.append(p)
                continue
            if g is Grouping.DIRECT and direct is None:
                raise TopologyError(f"stream {stream!r} is direct-grouped to {b.edge.target!r}: "
                                    "use emit_direct")
            b.rows.append(values)
            b.anchors.append(next(child))
            b.parts.append(direct if g is Grouping.DIRECT else None)
        self._result.emitted += 1

    def ack(self, t: Tuple) -> None:
        if not t.settled:
            self._result.acks += self._anch.ack(t)
            self._result.acked += 1

    def fail(self, t: Tuple) -> None:
        if not t.settled:
            self._result.acks += self._anch.fail(t)
            self._result.failed += 1

    def reset_timeout(self, t: Tuple) -> None:
        self._result.acks += self._anch.reset_timeout(t)

    def report_error(self, error: BaseException | str) -> None:
        self._result.errors.append(_describe(error))

    # ----- a micro-batch -----------------------------------------------------

    def run(self, batches: Sequence[TupleBatch]) -> ExecResult:
        self._result = ExecResult()
        tuples = [t for b in batches for t in b.tuples()]
        if isinstance(self.bolt, Bolt):
            for t in tuples:
                self._result.executed += 1
                try:
                    self.bolt.execute(t)
                except Exception as e:  # user code: fail the input, keep going
                    self.report_error(e)
                    self.fail(t)
        else:
            self._run_batch(self.bolt, batches, tuples)
        return self._flush()

    def _run_batch(self, bolt: BatchBolt, batches: Sequence[TupleBatch],
                   tuples: list[Tuple]) -> None:
        self._result.executed += len(tuples)
        if not tuples:
            return
        frames = [b.data.drop_columns([c for c in b.data.schema.names if c in RESERVED])
                  .to_pandas().assign(__stream=b.stream, __source=b.source) for b in batches]
        df = pd.concat(frames, ignore_index=True)
        try:
            out = bolt.process(df)
            if PARENT not in out.columns:
                raise TopologyError(f"a batch bolt's output needs a {PARENT!r} column")
            parents = out[PARENT].astype("int64").tolist()
            if parents and (min(parents) < 0 or max(parents) >= len(tuples)):
                raise TopologyError(f"{PARENT} names a row outside 0..{len(tuples) - 1}")
            stream_col = out["__stream"].tolist() if "__stream" in out.columns else None
            cols: dict[str, list[Any]] = {}
            for fields in self.outputs.values():
                for f in fields:
                    if f not in cols:
                        if f not in out.columns:
                            raise TopologyError(f"batch bolt output lacks declared field {f!r}")
                        cols[f] = out[f].tolist()
            for i, parent in enumerate(parents):
                stream = stream_col[i] if stream_col else DEFAULT_STREAM
                fields = self.outputs[stream]
                self.emit(stream, [cols[f][i] for f in fields], [tuples[parent]], None)
        except Exception as e:
            self.report_error(e)
            for t in tuples:
                self.fail(t)
            return
        for t in tuples:
            self.ack(t)

    def _flush(self) -> ExecResult:
        res = self._result
        for buffers in self._edges.values():
            for b in buffers:
                if not b.rows:
                    continue
                routed = b.router.route(b.rows) if any(p is None for p in b.parts) else None
                by_part: dict[int, list[int]] = {}
                for i, p in enumerate(b.parts):
                    part = int(routed[i]) if p is None and routed is not None else int(p or 0)
                    by_part.setdefault(part, []).append(i)
                fields = self.outputs[b.edge.stream]
                for part, idx in sorted(by_part.items()):
                    cols = {f: pa.array([b.rows[i][c] for i in idx]) for c, f in enumerate(fields)}
                    res.outputs.append((b.edge.topic, part, TupleBatch.from_columns(
                        cols, [b.anchors[i] for i in idx], stream=b.edge.stream,
                        source=self.context.component, source_task=self.context.task)))
                b.rows, b.anchors, b.parts = [], [], []
        res.acks = coalesce(res.acks)
        return res


def _describe(error: BaseException | str) -> str:
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"
    return error
