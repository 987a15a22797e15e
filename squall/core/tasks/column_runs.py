"""Micro-batch runs whose outputs are anchored in columns rather than emit by emit.

When every input has exactly one anchor and every output row names its one parent
input, Storm's collector arithmetic can be done for the whole batch in numpy: a fresh
edge id per output copy, XORed into its parent's ack value and made the child's anchor;
the children's place in their trees (lineage) from their parents'; then every input
acked, the acks coalesced per root with one sort. Two runs qualify:

- a :class:`~squall.core.bolt_api.bolt.BatchBolt`'s one call (its output's ``__parent``);
- a :class:`~squall.core.bolt_api.bolt.BasicBolt`'s ``process`` called per input: the
  rows it returns are anchored to that input and the input is acked (its contract), so
  they need not pass the collector one by one. An exception, a generator that raises, or
  a row of the wrong length or of a value its column cannot hold fails that input alone,
  as in the per-tuple run.

What a bolt does through its collector during such a run (an emit on another stream, an
ack) is kept by the executor as usual and merged at its flush.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from squall.core.bolt_api.batch_io import BatchOutput
from squall.core.bolt_api.bolt import BasicBolt, BatchBolt, TaskContext
from squall.core.errors import TopologyError
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.lineage import occurrence
from squall.core.reliability.records import AckerBatch, RecordKind
from squall.core.reliability.tuples import DEFAULT_STREAM, Anchoring, Tuple
from squall.core.tasks.books import Books
from squall.core.tasks.emits import EdgeBuffer, StreamPlan
from squall.core.tasks.exec_result import ALL_INPUTS, CallWatch, ExecResult
from squall.core.topology.grouping import Grouping
from squall.core.wire.columns import to_columns
from squall.core.wire.tuple_batch import IDS_COL, ROOTS_COL, SRC_TYPE, Lineage, Origins, TupleBatch

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
_ANCHORS = pa.list_(pa.uint64())


def single_anchored(batches: Sequence[TupleBatch]) -> bool:
    """Whether every input tuple has exactly one anchor (its outputs can be anchored in
    columns)."""
    roots = pa.chunked_array([b.data.column(ROOTS_COL) for b in batches], _ANCHORS)
    return len(roots) > 0 and pc.all(pc.equal(pc.list_value_length(roots), 1)).as_py() is True


def basic_in_columns(bolt: object, plan: StreamPlan | None) -> bool:
    """Whether a bolt's run may anchor its outputs in columns: a BasicBolt that keeps
    BasicBolt's ``execute``, whose default stream goes nowhere or to plain and all
    groupings (direct and custom ones choose per emit)."""
    return isinstance(bolt, BasicBolt) and type(bolt).execute is BasicBolt.execute and \
        plan is not None and all(b.plain or b.edge.grouping is Grouping.ALL
                                 for b in plan.buffers)


class _Inputs:
    """The micro-batch's inputs as flat columns: each one's root, anchor id, source message
    and path in its tree."""

    def __init__(self, batches: Sequence[TupleBatch]) -> None:
        self.roots = _flat(batches, ROOTS_COL)
        self.ids = _flat(batches, IDS_COL)
        self.origins = _origins(batches)
        self.paths = np.concatenate([b.paths() for b in batches]) \
            if self.origins is not None else None

    def __len__(self) -> int:
        return int(self.roots.size)


def run_batch_bolt(ex: Books, bolt: BatchBolt, batches: Sequence[TupleBatch],
                   watch: CallWatch | None) -> ExecResult:
    """A batch bolt over inputs with one anchor each: no Python work per row."""
    res = ex.result
    ins = _Inputs(batches)
    n = len(ins)
    res.executed = n
    now = ex.clock.now_ms()
    try:
        out = called(bolt, batches, n, watch)
        parents, streams = out.parents, out.streams
        # which child of its parent each row is, over every stream (lineage.py)
        nth = occurrence(parents) if ins.paths is not None else None
        ack_vals = ins.ids.copy()
        for stream, fields in ex.outputs.items():
            sel = np.flatnonzero(streams == stream) if streams is not None else \
                (np.arange(len(out)) if stream == DEFAULT_STREAM else np.empty(0, np.int64))
            if not sel.size or not ex.plans[stream].buffers:
                continue
            missing = [f for f in fields if not out.has(f)]
            if missing:
                raise TopologyError(f"batch bolt output lacks declared fields {missing}")
            cols = {f: out.arrow(f, sel) for f in fields}
            par = parents[sel]
            res.emitted += int(sel.size)
            lin = None if ins.paths is None or nth is None else (
                ins.paths[par], nth[sel].astype(np.uint32))
            for buf in ex.plans[stream].buffers:
                _emit(ex.context, ex.batch_ids, buf, cols, par, None, ins, ack_vals, res, lin)
    except Exception as e:
        failed = np.unique(ins.roots)
        ex.failed_by(e, failed.tolist())
        res.failed = n
        res.acks = AckerBatch.fails(failed, now)
        return res
    res.acked = n
    res.acks = _acks(ins.roots, ack_vals, now)
    return res


def run_basic(ex: Books, bolt: BasicBolt, batches: Sequence[TupleBatch],
              tuples: Sequence[Tuple], watch: CallWatch | None) -> AckerBatch:
    """A BasicBolt's ``process`` over each input (with one anchor each), its rows anchored
    in columns; returns the inputs' acks and fails (the executor's flush adds the rest)."""
    res = ex.result
    plan = ex.plans[DEFAULT_STREAM]
    n = len(tuples)
    res.executed += n
    rows, ends, failed = _gathered(bolt.process, tuples, watch)
    parents = np.repeat(np.arange(n), np.diff(ends, prepend=0))
    sizes = _sizes(rows)
    for k in np.flatnonzero(sizes != len(plan.fields)).tolist():
        what = f"{sizes[k]} values" if sizes[k] >= 0 else \
            f"a {type(rows[k]).__name__} (not a sequence of values)"
        failed.setdefault(int(parents[k]), TopologyError(
            f"emit of {what} on stream {DEFAULT_STREAM!r} declared with fields "
            f"{list(plan.fields)}"))
    held = [Anchoring.held(t) for t in tuples]
    settled = [i for i, t in enumerate(tuples) if t.settled]
    for i in settled if plan.buffers else ():  # acked or failed through the collector
        if ends[i] > (ends[i - 1] if i else 0):
            failed.setdefault(i, TopologyError(
                f"cannot anchor to {tuples[i]!r}: it is already acked or failed"))
    cols: dict[str, pa.Array] = {}
    while rows:
        if failed:  # a failed input has no children
            stay = ~np.isin(parents, list(failed))
            rows = [r for r, s in zip(rows, stay.tolist(), strict=True) if s]
            parents = parents[stay]
        if not plan.buffers or not rows:
            break
        cols, bad = to_columns(plan.fields, rows)
        if not bad:
            break
        for k, reason in bad.items():
            # A value that cannot share its column fails its input, like an exception
            # in the bolt would: the batch and the process go on.
            failed[int(parents[k])] = f"emitted on stream {DEFAULT_STREAM!r}: {reason}"
    for i, e in failed.items():
        ex.failed_by(e, tuples[i].roots)
    ins = _Inputs(batches)
    ack_vals = ins.ids.copy()
    ack_vals ^= np.fromiter((v for _, v in held), np.uint64, n)  # emits through the collector
    if rows:
        res.emitted += len(rows)
    if rows and plan.buffers:
        lin = None
        if ins.paths is not None:
            base = np.fromiter((c for c, _ in held), np.int64, n)
            lin = (ins.paths[parents], (occurrence(parents) + base[parents]).astype(np.uint32))
        for buf in plan.buffers:
            # On the columns where the keys are strings (the same partitions, hashed once
            # per distinct key); else on the rows' own values, as emit by emit (a column
            # may have widened them: integers among floats).
            parts = None if all(pa.types.is_string(cols[f].type) for f in buf.edge.fields) \
                else buf.router.route(rows)
            _emit(ex.context, ex.batch_ids, buf, cols, parents, parts, ins, ack_vals, res, lin)
    acked = np.ones(n, bool)
    acked[settled] = False
    acked[list(failed)] = False
    fail_now = [i for i in failed if not tuples[i].settled]
    Anchoring.settle(tuples)
    res.acked += int(acked.sum())
    res.failed += len(fail_now)
    now = ex.clock.now_ms()
    return AckerBatch.concat([_acks(ins.roots[acked], ack_vals[acked], now),
                              AckerBatch.fails(np.unique(ins.roots[fail_now]), now)])


def _gathered(process: Callable[[Tuple], Iterable[Sequence[Any]] | None],
              tuples: Sequence[Tuple], watch: CallWatch | None
              ) -> tuple[list[Sequence[Any]], I64, dict[int, BaseException | str]]:
    """Every input's rows, one list; where each input's rows end in it; the inputs whose
    call raised, with what it raised."""
    rows: list[Sequence[Any]] = []
    ends = np.empty(len(tuples), np.int64)
    failed: dict[int, BaseException | str] = {}
    extend = rows.extend
    for i, t in enumerate(tuples):
        if watch is not None:
            watch.enter(i)
        start = len(rows)
        try:
            out = process(t)
            if out is not None:
                extend(out)
        except Exception as e:  # user code: fail this input, keep going
            del rows[start:]
            failed[i] = e
        if watch is not None:
            watch.leave()
        ends[i] = len(rows)
    return rows, ends, failed


def _sizes(rows: list[Sequence[Any]]) -> I64:
    """Each row's length; -1 for a row that has none (not a sequence: its input fails)."""
    try:
        return np.fromiter(map(len, rows), np.int64, len(rows))
    except TypeError:
        return np.array([_length(r) for r in rows], np.int64)


def _length(row: object) -> int:
    try:
        return len(row)  # type: ignore[arg-type]
    except TypeError:
        return -1


def called(bolt: BatchBolt, batches: Sequence[TupleBatch], n: int,
           watch: CallWatch | None) -> BatchOutput:
    """A batch bolt's one call over all ``n`` inputs, watched."""
    if watch is None:
        return BatchOutput.run(bolt, batches, n)
    watch.enter(ALL_INPUTS)
    try:
        return BatchOutput.run(bolt, batches, n)
    finally:
        watch.leave()


def _emit(context: TaskContext, batch_ids: IdBatcher, buf: EdgeBuffer,
          cols: Mapping[str, pa.Array], parents: I64, parts: I64 | None, ins: _Inputs,
          ack_vals: U64, res: ExecResult, lineage: Lineage | None) -> None:
    """Output rows (``cols``, each of input ``parents``) to one edge: their edges XORed
    into their parents' ``ack_vals``, a batch per target partition. ``parts``: each row's
    partition (None: routed here, on the columns); ``lineage``: each row's (emitted_by,
    nth), with the inputs' origins."""
    e = buf.edge
    m = parents.size
    if e.grouping is Grouping.ALL:
        idx = np.repeat(np.arange(m), e.partitions)
        parts = np.tile(np.arange(e.partitions), m)
    elif e.grouping is Grouping.DIRECT:
        raise TopologyError(f"a batch bolt cannot emit direct to {e.target!r}")
    else:
        idx = np.arange(m)
        if parts is None:
            parts = buf.router.route_columns(dict(cols), m)
    edge_ids = batch_ids.ids(idx.size)
    np.bitwise_xor.at(ack_vals, parents[idx], edge_ids)
    child_roots = ins.roots[parents[idx]]
    origins = ins.origins
    for p in np.flatnonzero(np.bincount(parts, minlength=e.partitions)).tolist():  # no sort
        s = np.flatnonzero(parts == p)
        rows = idx[s]
        take = pa.array(rows)
        of = parents[rows]
        res.outputs.append((e.topic, p, TupleBatch.single_anchored(
            {f: c.take(take) for f, c in cols.items()}, child_roots[s], edge_ids[s],
            stream=e.stream, source=context.component, source_task=context.task,
            origins=None if origins is None else (origins[0].take(pa.array(of)),
                                                  origins[1][of]),
            lineage=None if lineage is None else (lineage[0][rows], lineage[1][rows]))))


def _flat(batches: Sequence[TupleBatch], col: str) -> U64:
    return np.asarray(pc.list_flatten(pa.chunked_array([b.data.column(col) for b in batches],
                                                        _ANCHORS)).to_numpy(), np.uint64)


def _origins(batches: Sequence[TupleBatch]) -> Origins | None:
    """The inputs' source messages, one row each (None if no input carries them)."""
    got = [b.origins() for b in batches]
    if all(o is None for o in got):
        return None
    src = pa.chunked_array([pa.nulls(len(b), SRC_TYPE) if o is None else o[0]
                            for b, o in zip(batches, got, strict=True)], SRC_TYPE)
    off = np.concatenate([np.full(len(b), -1, np.int64) if o is None else o[1]
                          for b, o in zip(batches, got, strict=True)])
    return src.unify_dictionaries().combine_chunks(), off


def _acks(roots: U64, vals: U64, now: int) -> AckerBatch:
    n = roots.size
    return AckerBatch(roots, vals, np.full(n, RecordKind.ACK, np.uint8), np.zeros(n, np.uint16),
                      np.full(n, now, np.int64)).coalesced()
