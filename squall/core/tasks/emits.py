"""Where a per-tuple bolt's emits wait until the end of the micro-batch: one buffer per
subscribed edge, and per stream a plan made once, so that an emit does the least work.

Most emits are a word count's or a join's: one anchor or a few, one subscriber with a
shuffle or fields grouping. Their plan has ``only`` set; the collector then appends one
row to one buffer (squall/core/tasks/collector.py). The rest (several subscribers, all /
direct / custom groupings) take the executor's general path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from squall.core.errors import TopologyError
from squall.core.reliability.lineage import NO_NTH, paths_of
from squall.core.reliability.tuples import Tuple
from squall.core.topology.grouping import Edge, Grouping
from squall.core.topology.routing import Router

#: One emitted copy: its values, its anchors (root -> edge id), its fixed partition (all,
#: direct, custom: else None, routed at the flush), its source message, and its slot in
#: the message's tree (its parent's emitted_by and nth, and its index: ``Tuple.next_slot``).
Row = tuple[Sequence[Any], dict[int, int], int | None, tuple[str, int] | None,
            tuple[int, int, int]]
#: The slot of a tuple that descends from no known source message.
NO_SLOT = (0, NO_NTH, NO_NTH)


def child_lineage(slots: Sequence[tuple[int, int, int]]
                  ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint32]]:
    """The children's (emitted_by, nth) columns: each parent's path hashed for the whole
    batch at once (a Python hash per emit was a tenth of a per-tuple bolt's time)."""
    n = len(slots)
    by = np.fromiter((s[0] for s in slots), np.uint64, n)
    nth = np.fromiter((s[1] for s in slots), np.uint32, n)
    index = np.fromiter((s[2] for s in slots), np.uint32, n)
    return np.where(index == NO_NTH, np.uint64(0), paths_of(by, nth)), index


def slot_of(anchors: Sequence[Tuple]) -> tuple[tuple[str, int] | None, tuple[int, int, int]]:
    """A child's source message and slot in its tree: its first anchor's that has a source
    message, as that anchor's next child (squall/core/reliability/lineage.py)."""
    for a in anchors:
        origin = a.origin
        if origin is not None:
            return origin, a.next_slot()
    return None, NO_SLOT


@dataclass
class EdgeBuffer:
    edge: Edge
    router: Router
    rows: list[Row] = field(default_factory=list)

    @property
    def plain(self) -> bool:
        """One copy per emit, its partition chosen by the router at the flush."""
        return self.edge.grouping not in (Grouping.ALL, Grouping.DIRECT) and \
            not self.router.custom


@dataclass(frozen=True)
class StreamPlan:
    fields: tuple[str, ...]
    buffers: tuple[EdgeBuffer, ...]
    #: copies per emit over every subscriber (an all grouping sends one per partition)
    copies: int
    #: the stream's one subscriber, if it is plain (:attr:`EdgeBuffer.plain`)
    only: EdgeBuffer | None


def plans(outputs: Mapping[str, tuple[str, ...]], edges: Sequence[Edge], component: str,
          task: int) -> dict[str, StreamPlan]:
    """A plan per declared stream; an edge on an undeclared stream is an error."""
    buffers: dict[str, list[EdgeBuffer]] = {s: [] for s in outputs}
    for e in edges:
        fields = outputs.get(e.stream)
        if fields is None:
            raise TopologyError(f"bolt {component!r} declares no stream {e.stream!r} "
                                f"for its subscriber {e.target!r}")
        buffers[e.stream].append(EdgeBuffer(e, Router.for_edge(e, fields, task)))
    return {s: StreamPlan(outputs[s], tuple(bs), sum(b.edge.copies for b in bs),
                          bs[0] if len(bs) == 1 and bs[0].plain else None)
            for s, bs in buffers.items()}
