"""Tuples, anchoring and the ack records they produce (Storm's OutputCollector arithmetic).

A tuple carries ``anchors``: for every root it belongs to, the XOR of the edge
ids linking it into that root's tree (Storm's ``anchorsToIds``). Emitting a
child anchored to an input draws a fresh edge id per (anchor, target copy),
XORs it into the child's anchors for each of the anchor's roots and into the
anchor's own pending ack value. Acking the input then sends, for each of its
roots, ``anchors[root] ^ ack_val``: the input's edges leave the tree and its
children's edges enter it, in one record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from squall.core.errors import FieldError, UsageError
from squall.core.reliability.ids import new_id
from squall.core.reliability.lineage import NO_NTH, path_of
from squall.core.reliability.records import AckerRecord, RecordKind

#: The stream a component emits on unless it names another (Storm's "default").
DEFAULT_STREAM = "default"
#: Tick tuples' stream and component, Storm's names (squall/core/topology/ticks.py).
TICK_STREAM = "__tick"
SYSTEM_COMPONENT = "__system"

Fields = tuple[str, ...]


class Tuple:
    """A named list of values flowing on one stream, with its tree membership."""

    __slots__ = ("_ack_val", "_children", "_settled", "anchors", "emitted_by", "fields", "nth",
                 "origin", "source", "source_task", "stream", "values")

    def __init__(
        self,
        values: Sequence[Any],
        fields: Fields,
        anchors: Mapping[int, int] | None = None,
        *,
        stream: str = DEFAULT_STREAM,
        source: str = "",
        source_task: int = 0,
        origin: tuple[str, int] | None = None,
        emitted_by: int = 0,
        nth: int = NO_NTH,
    ) -> None:
        if len(values) != len(fields):
            raise UsageError(
                f"tuple on stream {stream!r} has {len(values)} values for fields {list(fields)}"
            )
        self.values = tuple(values)
        self.fields = fields
        self.anchors: dict[int, int] = dict(anchors or {})
        self.stream = stream
        self.source = source
        self.source_task = source_task
        #: the source message it descends from (source partition, offset), if known
        self.origin = origin
        #: its place in that message's tree: its parent's path and which child of it it is
        #: (squall/core/reliability/lineage.py)
        self.emitted_by = emitted_by
        self.nth = nth
        self._children = 0
        self._ack_val = 0
        self._settled = False

    @classmethod
    def of_batch(cls, values: tuple[Any, ...], fields: Fields, anchors: dict[int, int],
                 stream: str, source: str, source_task: int, origin: tuple[str, int] | None,
                 emitted_by: int, nth: int) -> Tuple:
        """A tuple read from a batch's columns: ``values`` fit ``fields`` and ``anchors``
        is its own already, so nothing is checked or copied (a micro-batch makes
        thousands)."""
        t = cls.__new__(cls)
        t.values, t.fields, t.anchors, t.stream = values, fields, anchors, stream
        t.source, t.source_task, t.origin = source, source_task, origin
        t.emitted_by, t.nth, t._children, t._ack_val, t._settled = emitted_by, nth, 0, 0, False
        return t

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, str):
            try:
                return self.values[self.fields.index(key)]
            except ValueError:
                raise FieldError(f"no field {key!r} in {list(self.fields)}") from None
        return self.values[key]

    def __repr__(self) -> str:
        return f"Tuple({dict(zip(self.fields, self.values, strict=True))}, stream={self.stream!r})"

    @property
    def is_tick(self) -> bool:
        """Whether it is a tick tuple (Storm's ``TupleUtils.isTick``)."""
        return self.stream == TICK_STREAM and self.source == SYSTEM_COMPONENT

    @property
    def path(self) -> int:
        """Its path in its source message's tree (0: a spout's tuple)."""
        return path_of(self.emitted_by, self.nth)

    def next_slot(self) -> tuple[int, int, int]:
        """Where the next tuple emitted anchored to this one first goes in the tree: this
        one's (emitted_by, nth) and the child's index. The child's ``emitted_by`` is this
        one's path, hashed with the rest of the batch's (``lineage.paths_of``)."""
        j = self._children
        self._children += 1
        return self.emitted_by, self.nth, j

    @property
    def roots(self) -> list[int]:
        return list(self.anchors)

    @property
    def tracked(self) -> bool:
        return bool(self.anchors)

    @property
    def settled(self) -> bool:
        """Acked or failed already."""
        return self._settled


@dataclass(frozen=True, slots=True)
class SpoutEmit:
    """What a spout sends for one source message: the root, per-target anchors, the init."""

    root: int
    anchors: list[dict[int, int]]
    init: AckerRecord


class Anchoring:
    """The bookkeeping behind emit / ack / fail for one task. Pure: returns records."""

    def __init__(self, ids: Callable[[], int] = new_id) -> None:
        self._ids = ids

    def spout_emit(self, spout_task: int, n_targets: int) -> SpoutEmit:
        """A new root sent to ``n_targets`` task copies; the init XORs every edge."""
        root = self._ids()
        anchors: list[dict[int, int]] = []
        xor = 0
        for _ in range(n_targets):
            edge = self._ids()
            xor ^= edge
            anchors.append({root: edge})
        return SpoutEmit(root, anchors, AckerRecord(RecordKind.INIT, root, xor, spout_task))

    def emit(self, anchors: Sequence[Tuple], n_targets: int = 1) -> list[dict[int, int]]:
        """Anchors for ``n_targets`` copies of a child of ``anchors`` (none: untracked)."""
        out: list[dict[int, int]] = []
        for _ in range(n_targets):
            child: dict[int, int] = {}
            for parent in anchors:
                if not parent.anchors:
                    continue
                if parent._settled:
                    raise UsageError(f"cannot anchor to {parent!r}: it is already acked or failed")
                edge = self._ids()
                parent._ack_val ^= edge
                for root in parent.anchors:
                    child[root] = child.get(root, 0) ^ edge
            out.append(child)
        return out

    def emit_one(self, parent: Tuple) -> dict[int, int]:
        """``emit([parent])[0]``: the anchors of one copy of a child of one tuple, the
        common case, without the loops."""
        if not parent.anchors:
            return {}
        if parent._settled:
            raise UsageError(f"cannot anchor to {parent!r}: it is already acked or failed")
        edge = self._ids()
        parent._ack_val ^= edge
        if len(parent.anchors) == 1:  # one tree: a literal is cheaper than fromkeys
            for root in parent.anchors:
                return {root: edge}
        return dict.fromkeys(parent.anchors, edge)

    def ack(self, t: Tuple) -> list[AckerRecord]:
        """Ack records for ``t``; a second ack or fail of the same tuple sends nothing."""
        if t._settled or not t.anchors:
            t._settled = True
            return []
        t._settled = True
        return [AckerRecord(RecordKind.ACK, r, e ^ t._ack_val) for r, e in t.anchors.items()]

    def ack_into(self, t: Tuple, roots: list[int], values: list[int]) -> None:
        """:meth:`ack`, its records appended as ``(root, value)`` to ``roots`` and
        ``values`` (no record object each: a micro-batch acks thousands)."""
        if not t._settled:
            v = t._ack_val
            for r, e in t.anchors.items():
                roots.append(r)
                values.append(e ^ v)
        t._settled = True

    def children_so_far(self, t: Tuple) -> list[AckerRecord]:
        """Records that put ``t``'s children so far into its trees now and leave ``t``
        pending: a tuple a window keeps across micro-batches (and processes) cannot carry
        their edges until it is acked. XOR makes the sum the same as one ack's."""
        if t._settled or not t._ack_val:
            return []
        val, t._ack_val = t._ack_val, 0
        return [AckerRecord(RecordKind.ACK, r, val) for r in t.anchors]

    def fail(self, t: Tuple) -> list[AckerRecord]:
        if t._settled or not t.anchors:
            t._settled = True
            return []
        t._settled = True
        return [AckerRecord(RecordKind.FAIL, r) for r in t.anchors]

    def reset_timeout(self, t: Tuple) -> list[AckerRecord]:
        if t._settled:
            return []
        return [AckerRecord(RecordKind.RESET, r) for r in t.anchors]
