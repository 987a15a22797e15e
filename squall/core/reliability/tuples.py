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

from collections.abc import Callable, Iterable, Mapping, Sequence
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


class TupleGroup:
    """The tuples read from one batch: what they share (fields, stream, source component
    and task) and, row by row, their values, anchors, source messages and places in their
    trees, as columns. A tuple is a row of them: a micro-batch reads thousands, and one
    object each is what reading them costs."""

    __slots__ = ("_origins", "_read_origins", "by", "columns", "fields", "ids", "index", "nth",
                 "roots", "source", "source_task", "starts", "stream")

    def __init__(self, fields: Fields, stream: str, source: str, source_task: int,
                 columns: Sequence[Sequence[Any]], by: Sequence[int], nth: Sequence[int],
                 origins: Callable[[], Sequence[tuple[str, int] | None]] | None = None,
                 roots: Sequence[int] = (), ids: Sequence[int] = (),
                 starts: Sequence[int] = ()) -> None:
        """``columns``: each field's values by row; ``origins``: reads the rows' source
        messages (None: none known), once, when a tuple's is first asked for; ``roots``
        and ``ids``: the rows' anchors, one each, or, with ``starts``, row ``r``'s from
        ``starts[r]`` to ``starts[r + 1]`` (a join's children have several)."""
        self.fields, self.stream, self.source, self.source_task = fields, stream, source, \
            source_task
        self.index = {f: i for i, f in enumerate(fields)}
        self.columns, self.by, self.nth, self.roots, self.ids = columns, by, nth, roots, ids
        self.starts = starts
        self._read_origins = origins
        self._origins: Sequence[tuple[str, int] | None] | None = None

    def anchors(self, row: int) -> dict[int, int]:
        st = self.starts
        if not st:
            return {self.roots[row]: self.ids[row]}
        lo, hi = st[row], st[row + 1]
        return dict(zip(self.roots[lo:hi], self.ids[lo:hi], strict=True))

    def origin(self, row: int) -> tuple[str, int] | None:
        if self._origins is None:
            read = self._read_origins
            if read is None:
                return None
            self._origins = read()
        return self._origins[row]


class Tuple:
    """A named list of values flowing on one stream, with its tree membership."""

    __slots__ = ("_ack_val", "_anchors", "_children", "_group", "_row", "_settled")

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
        """``origin``: the source message it descends from (source partition, offset), if
        known; ``emitted_by`` and ``nth``: its place in that message's tree, its parent's
        path and which child of it it is (squall/core/reliability/lineage.py)."""
        if len(values) != len(fields):
            raise UsageError(
                f"tuple on stream {stream!r} has {len(values)} values for fields {list(fields)}"
            )
        self._group = TupleGroup(fields, stream, source, source_task, [[v] for v in values],
                                 [emitted_by], [nth],
                                 None if origin is None else (lambda: [origin]))
        self._row = 0
        self._anchors: dict[int, int] | None = dict(anchors or {})
        self._children = 0
        self._ack_val = 0
        self._settled = False

    @classmethod
    def of_group(cls, group: TupleGroup, rows: int) -> list[Tuple]:
        """The group's ``rows`` tuples, anchored as the group says. Nothing is checked or
        copied."""
        new = cls.__new__
        out: list[Tuple] = []
        append = out.append
        for row in range(rows):
            t = new(cls)
            t._group = group  # one store a statement: quicker than a tuple unpacked
            t._row = row
            t._anchors = None
            t._children = 0
            t._ack_val = 0
            t._settled = False
            append(t)
        return out

    @property
    def values(self) -> tuple[Any, ...]:
        row = self._row
        return tuple(c[row] for c in self._group.columns)

    @property
    def anchors(self) -> dict[int, int]:
        """For every root it belongs to, the XOR of the edge ids linking it into that
        root's tree."""
        a = self._anchors
        if a is None:
            a = self._anchors = self._group.anchors(self._row)
        return a

    @property
    def fields(self) -> Fields:
        return self._group.fields

    @property
    def stream(self) -> str:
        return self._group.stream

    @property
    def source(self) -> str:
        return self._group.source

    @property
    def source_task(self) -> int:
        return self._group.source_task

    @property
    def origin(self) -> tuple[str, int] | None:
        """The source message it descends from (source partition, offset), if known."""
        return self._group.origin(self._row)

    @property
    def emitted_by(self) -> int:
        """Its parent's path in its source message's tree (lineage.py)."""
        return self._group.by[self._row]

    @property
    def nth(self) -> int:
        """Which child of its parent it is (``NO_NTH``: a spout's tuple)."""
        return self._group.nth[self._row]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled on its own, not with its batch's group (a bolt's state may keep it)."""
        return _restored, (self.values, self.fields, self.anchors, self.stream, self.source,
                           self.source_task, self.origin, self.emitted_by, self.nth,
                           self._children, self._ack_val, self._settled)

    def __getitem__(self, key: int | str) -> Any:
        g = self._group
        if isinstance(key, str):
            try:
                return g.columns[g.index[key]][self._row]
            except KeyError:
                raise FieldError(f"no field {key!r} in {list(g.fields)}") from None
        return g.columns[key][self._row]

    def __repr__(self) -> str:
        return f"Tuple({dict(zip(self.fields, self.values, strict=True))}, stream={self.stream!r})"

    @property
    def is_tick(self) -> bool:
        """Whether it is a tick tuple (Storm's ``TupleUtils.isTick``)."""
        g = self._group
        return g.stream == TICK_STREAM and g.source == SYSTEM_COMPONENT

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
        g, row = self._group, self._row
        return g.by[row], g.nth[row], j

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


def _restored(values: tuple[Any, ...], fields: Fields, anchors: dict[int, int], stream: str,
              source: str, source_task: int, origin: tuple[str, int] | None, emitted_by: int,
              nth: int, children: int, ack_val: int, settled: bool) -> Tuple:
    t = Tuple(values, fields, anchors, stream=stream, source=source, source_task=source_task,
              origin=origin, emitted_by=emitted_by, nth=nth)
    t._children, t._ack_val, t._settled = children, ack_val, settled
    return t


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
        return [self.child_of(anchors) for _ in range(n_targets)]

    def child_of(self, anchors: Sequence[Tuple]) -> dict[int, int]:
        """The anchors of one copy of a child of ``anchors`` (a join's: several)."""
        child: dict[int, int] = {}
        ids = self._ids
        for parent in anchors:
            own = parent._anchors
            if own is None:
                g = parent._group
                if not g.starts:  # its group's one anchor (the common case, first)
                    if parent._settled:
                        raise UsageError(f"cannot anchor to {parent!r}: it is already acked "
                                         "or failed")
                    edge = ids()
                    parent._ack_val ^= edge
                    root = g.roots[parent._row]
                    child[root] = child.get(root, 0) ^ edge
                    continue
                own = parent.anchors
            if not own:
                continue
            if parent._settled:
                raise UsageError(f"cannot anchor to {parent!r}: it is already acked or failed")
            edge = ids()
            parent._ack_val ^= edge
            for root in own:
                child[root] = child.get(root, 0) ^ edge
        return child

    def emit_one(self, parent: Tuple) -> dict[int, int]:
        """``emit([parent])[0]``: the anchors of one copy of a child of one tuple, the
        common case, without the loops."""
        anchors = parent._anchors
        if anchors is None and parent._group.starts:  # its group's, several
            anchors = parent.anchors
        if anchors is not None and not anchors:
            return {}
        if parent._settled:
            raise UsageError(f"cannot anchor to {parent!r}: it is already acked or failed")
        edge = self._ids()
        parent._ack_val ^= edge
        if anchors is None:  # one tree, its group's: a literal is cheaper than fromkeys
            return {parent._group.roots[parent._row]: edge}
        return dict.fromkeys(anchors, edge)

    def ack(self, t: Tuple) -> list[AckerRecord]:
        """Ack records for ``t``; a second ack or fail of the same tuple sends nothing."""
        if t._settled or not t.anchors:
            t._settled = True
            return []
        t._settled = True
        return [AckerRecord(RecordKind.ACK, r, e ^ t._ack_val) for r, e in t.anchors.items()]

    def ack_into(self, t: Tuple, roots: list[int], values: list[int]) -> bool:
        """:meth:`ack`, its records appended as ``(root, value)`` to ``roots`` and
        ``values`` (no record object each: a micro-batch acks thousands). Whether ``t``
        was acked now (not before, nor failed)."""
        if t._settled:
            return False
        t._settled = True
        v = t._ack_val
        anchors = t._anchors
        if anchors is None:  # its group's
            g, row = t._group, t._row
            st = g.starts
            if not st:
                roots.append(g.roots[row])
                values.append(g.ids[row] ^ v)
                return True
            lo, hi = st[row], st[row + 1]
            roots += g.roots[lo:hi]
            ids = g.ids
            for k in range(lo, hi):
                values.append(ids[k] ^ v)
            return True
        for r, e in anchors.items():
            roots.append(r)
            values.append(e ^ v)
        return True

    @staticmethod
    def held(t: Tuple) -> tuple[int, int]:
        """``t``'s children so far and the XOR of their edges (what its ack will carry)."""
        return t._children, t._ack_val

    @staticmethod
    def settle(tuples: Iterable[Tuple]) -> None:
        """Mark ``tuples`` acked or failed: their records were made in columns."""
        for t in tuples:
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
