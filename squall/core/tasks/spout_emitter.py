"""Decoded records to anchored tuples and acker inits (pure).

Each record becomes one tuple per copy of each outgoing edge, anchored to the record's
root with a fresh edge id; the record's init carries the XOR of those ids, so the tree
completes when every copy is acked (Storm's spout-side half of the ledger).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.records import AckerBatch, RecordKind
from squall.core.topology.grouping import Edge
from squall.core.topology.routing import Router
from squall.core.wire.scheme import Scheme
from squall.core.wire.tuple_batch import TupleBatch

U64 = npt.NDArray[np.uint64]
#: (edge topic, partition, tuples) to produce.
Routed = list[tuple[str, int, TupleBatch]]


class Emitter:
    def __init__(self, component: str, task: int, scheme: Scheme, edges: tuple[Edge, ...],
                 ids: IdBatcher | None = None) -> None:
        self.component = component
        self.task = task
        self.edges = edges
        self.routers = [Router.for_edge(e, scheme.fields, task) for e in edges]
        self.copies = sum(e.copies for e in edges)
        self._ids = ids or IdBatcher()

    def emit(self, columns: dict[str, pa.Array], rows: list[tuple[Any, ...]] | None, n: int,
             roots: U64 | None, now_ms: int,
             origin: tuple[str, npt.NDArray[np.int64]] | None = None
             ) -> tuple[Routed, AckerBatch]:
        """Tuples for ``n`` records (``rows`` may be None when no grouping needs them), and
        their inits; untracked (``roots`` None): unanchored tuples and no inits. ``origin``:
        the records' source partition and offsets, carried by every tuple (exact state)."""
        inits = AckerBatch.empty()
        edge_ids: U64 | None = None
        if roots is not None:
            edge_ids = self._ids.ids(n * self.copies).reshape(n, self.copies) if self.copies \
                else np.zeros((n, 0), np.uint64)
            init_vals = np.bitwise_xor.reduce(edge_ids, axis=1) if self.copies \
                else np.zeros(n, np.uint64)
            inits = AckerBatch(roots, init_vals, np.full(n, RecordKind.INIT, np.uint8),
                               np.full(n, self.task, np.uint16), np.full(n, now_ms, np.int64))
        out: Routed = []
        col = 0
        src = None if origin is None else pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n, np.int32)), pa.array([origin[0]], pa.string()))
        for edge, router in zip(self.edges, self.routers, strict=True):
            if rows is None and router.needs_rows:
                rows = list(zip(*(c.to_pylist() for c in columns.values()), strict=True))
            parts = router.route(rows) if rows is not None else router.route_n(n)
            k = edge.copies
            rep = np.repeat(np.arange(n), k) if k > 1 else np.arange(n)
            ids = None if edge_ids is None else edge_ids[:, col:col + k].reshape(-1)
            col += k
            for p in np.unique(parts).tolist():
                sel = np.flatnonzero(parts == p)
                rows_sel = rep[sel]
                take = pa.array(rows_sel)
                batch = TupleBatch.single_anchored(
                    {f: c.take(take) for f, c in columns.items()},
                    None if roots is None or ids is None else roots[rows_sel],
                    None if ids is None else ids[sel],
                    stream=edge.stream, source=self.component, source_task=self.task,
                    origins=None if src is None or origin is None else (
                        src.take(take), origin[1][rows_sel]))
                out.append((edge.topic, p, batch))
        return out, inits
