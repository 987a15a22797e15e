"""A persistent aggregate's task, on the executors: Trident state applied exactly once.

Per micro-batch, holding the task's lock (a fused aggregate's task runs in every upstream
task's partition), the task's input tuples are keyed, filtered and aggregated into the
state in one database transaction under the task's next txid
(:class:`~squall.core.trident.persist.PersistentAggregate`), then every input is acked: a
tree completes only once its words are in the state. A micro-batch that Spark runs again
gets a new txid: the applied records and the task's floors (the spout's committed offsets)
skip what its first run applied. What changed goes out on
the bolt's stream (Trident's ``newValuesStream``), untracked: the state is exact, the new
values are a best-effort feed.

A database that fails a batch fails the micro-batch (Spark runs it again after the job's
restart) rather than the tuples: an outage then holds the trees (their timeouts count
processed time) instead of replaying and, in the end, dead-lettering healthy messages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from squall.backends import open_state
from squall.core.reliability.clock import Clock
from squall.core.reliability.lineage import unit
from squall.core.reliability.records import AckerBatch, RecordKind
from squall.core.tasks.exec_result import ExecResult
from squall.core.topology.grouping import Edge
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.routing import Router
from squall.core.topology.trident import (
    AggregateSpec,
    PersistSpec,
    QuerySpec,
    stored_state,
    trident_spec,
)
from squall.core.trident.aggregators import CodedKeys
from squall.core.trident.cached import CachedMap
from squall.core.trident.maps import map_state
from squall.core.trident.persist import (
    UNKNOWN,
    BatchInput,
    PartitionPersist,
    PersistentAggregate,
)
from squall.core.wire.tuple_batch import IDS_COL, ROOTS_COL, TupleBatch

_ANCHORS = pa.list_(pa.uint64())


class AggregateTask:
    def __init__(self, spec: TopologySpec, bolt: BoltSpec, task: int, default_url: str,
                 clock: Clock, committed: Callable[[], dict[str, int]] | None = None) -> None:
        where = f"bolt {bolt.name!r}"
        t = trident_spec(bolt.cls, bolt.config, where)
        assert not isinstance(t, QuerySpec), f"{where} keeps no state"
        self.spec: AggregateSpec | PersistSpec = t
        options = stored_state(spec.state_id, bolt.name, t)
        self.component, self.task, self.clock = bolt.name, task, clock
        self.store = open_state(options, default_url, task)
        self.cache = CachedMap(self.store, options.cache_size) if options.cache_size else None
        state = map_state(options.kind, self.cache or self.store)
        self.engine: PersistentAggregate[Any] | PartitionPersist[Any] = (
            PersistentAggregate(state, self.store, t.load_aggregator(where))
            if isinstance(t, AggregateSpec) else
            PartitionPersist(state, self.store, t.load_updater(where)))
        self.fields = t.outputs()["default"]
        self.edges = [(e, Router.for_edge(e, self.fields, task))
                      for e in spec.edges_from(bolt.name)]
        self._last: int | None = None
        # The spouts' committed offsets: applied records below them are let go.
        self._committed = committed

    def close(self) -> None:
        """Let its connection go (it may be dead already)."""
        close = getattr(self.store, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):
                close()

    def run(self, batches: Sequence[TupleBatch]) -> ExecResult:
        res = ExecResult()
        batches = [b for b in batches if len(b)]
        inp = _input(batches, self.spec)
        committed = self._committed() if self._committed else None
        locked = getattr(self.store, "locked", contextlib.nullcontext)
        with locked():  # a fused aggregate's task runs in every upstream task's partition
            if self.cache is not None and self._last != self.store.load_task().txid:
                self.cache.clear()  # the task's last batch ran in another Python worker
            done = self.engine.run(None, inp, committed)
        self._last = done.txid
        res.executed = res.acked = len(inp.keys)
        res.acks = _acks(batches, self.clock.now_ms())
        if done.rows and self.edges:
            res.emitted = len(done.rows)
            for edge, router in self.edges:
                res.outputs += _routed(edge, router, self.fields, done.rows, self.component,
                                       self.task)
        return res


def _input(batches: Sequence[TupleBatch], agg: AggregateSpec | PersistSpec) -> BatchInput:
    keys: list[tuple[Any, ...]] = []
    values: list[tuple[Any, ...]] = []
    sources: list[npt.NDArray[np.object_]] = []
    offsets: list[np.ndarray] = []
    emissions: list[np.ndarray] = []
    roots: list[np.ndarray] = []
    coded = _coded_keys(batches, agg.group_by)
    for record, b in enumerate(batches):  # one batch per edge record
        n = len(b)
        if coded is None:
            keys += _rows(b, agg.group_by)
        values += _rows(b, agg.fields)
        o = b.origins()
        if o is None:  # no source message known: only the txid guards these
            sources.append(np.full(n, UNKNOWN, object))
            offsets.append(np.full(n, -1, np.int64))
        else:
            sources.append(_units(_names(o[0]), b.lineage()[0]))
            offsets.append(o[1])
        # An emission of a message reaches a task in one record, under one root: the record
        # and the root tell emissions apart (a batch bolt's one record holds replays too).
        emissions.append(np.full(n, record, np.int64))
        roots.append(b.first_roots())
    return BatchInput(keys if coded is None else coded, values,
                      np.concatenate(sources) if sources else np.zeros(0, object),
                      np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
                      np.concatenate(emissions) if emissions else np.zeros(0, np.int64),
                      np.concatenate(roots) if roots else np.zeros(0, np.uint64))


def _coded_keys(batches: Sequence[TupleBatch], group_by: tuple[str, ...]) -> CodedKeys | None:
    """One group-by field: the keys as codes into the distinct ones, through Arrow (no
    Python object per tuple; the counts then need none either). None: several fields, or
    the records' columns of different types (each tuple's key made in Python then)."""
    if len(group_by) != 1 or not batches:
        return None
    try:
        col = pa.chunked_array([b.data.column(group_by[0]) for b in batches]).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    enc = pc.dictionary_encode(col, null_encoding="encode")
    codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    return CodedKeys(codes, [(x,) for x in enc.dictionary.to_pylist()])


def _rows(b: TupleBatch, fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    if not fields:
        return [()] * len(b)
    if len(fields) == 1:
        return [(x,) for x in b.data.column(fields[0]).to_pylist()]
    return list(zip(*(b.data.column(f).to_pylist() for f in fields), strict=True))


def _names(arr: pa.Array) -> npt.NDArray[np.object_]:
    """Each tuple's source ("topic:partition"; UNKNOWN for none) as an object array: through
    the dictionary (a dictionary array's to_pylist makes a Python string per tuple)."""
    if not isinstance(arr, pa.DictionaryArray):
        return np.asarray([UNKNOWN if s is None else s for s in arr.to_pylist()], object)
    names = np.asarray([*(UNKNOWN if s is None else s for s in arr.dictionary.to_pylist()),
                        UNKNOWN], object)
    idx = arr.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)
    out: npt.NDArray[np.object_] = names[idx]
    return out


def _units(names: npt.NDArray[np.object_], by: npt.NDArray[np.uint64]
           ) -> npt.NDArray[np.object_]:
    """What the state records per tuple: its source, and past the first bolt the path of
    the tuple whose execution emitted it (squall/core/reliability/lineage.py)."""
    deeper = np.flatnonzero(by)
    if not deeper.size:
        return names
    out = names.copy()
    for name in set(names[deeper].tolist()) - {UNKNOWN}:  # few sources, few paths each
        at = deeper[names[deeper] == name]
        paths, inverse = np.unique(by[at], return_inverse=True)
        out[at] = np.asarray([unit(name, p) for p in paths.tolist()], object)[inverse]
    return out


def _acks(batches: Sequence[TupleBatch], now_ms: int) -> AckerBatch:
    """Every input acked (no children anchored): per anchor, its edge id."""
    if not batches:
        return AckerBatch.empty()
    roots = np.asarray(pc.list_flatten(pa.chunked_array(
        [b.data.column(ROOTS_COL) for b in batches], _ANCHORS)).to_numpy(), np.uint64)
    ids = np.asarray(pc.list_flatten(pa.chunked_array(
        [b.data.column(IDS_COL) for b in batches], _ANCHORS)).to_numpy(), np.uint64)
    n = roots.size
    return AckerBatch(roots, ids, np.full(n, RecordKind.ACK, np.uint8), np.zeros(n, np.uint16),
                      np.full(n, now_ms, np.int64)).coalesced()


def _routed(edge: Edge, router: Router, fields: tuple[str, ...], rows: list[tuple[Any, ...]],
            component: str, task: int) -> list[tuple[str, int, TupleBatch]]:
    parts = router.route(rows)
    out = []
    for p in np.unique(parts).tolist():
        sel = np.flatnonzero(parts == p).tolist()
        cols = {f: [rows[i][k] for i in sel] for k, f in enumerate(fields)}
        out.append((edge.topic, p, TupleBatch.from_columns(
            cols, [{}] * len(sel), stream=edge.stream, source=component, source_task=task)))
    return out
