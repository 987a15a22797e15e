"""Which source messages a stateful task has applied: Storm-level replays counted once.

A tree that failed or timed out is emitted again by the spout under a new root, when some of
its tuples may already have updated state in some tasks and not in others. A txid does not
see that: the replay comes in a later batch. So tuples carry their source message's
coordinates (source partition, offset), and each stateful task keeps, stored in the same
transaction as its values, one :class:`BatchRecord` per batch: the messages it applied. A
replayed message's tuples are skipped by the tasks that applied it and applied by the rest.

Rules:
- a message that an earlier batch applied is skipped (:meth:`AppliedSources.fresh`);
- starting batch ``txid`` forgets the records of ``txid`` and later (:meth:`~AppliedSources.
  begin`): a batch that Spark runs again sees the record as it was before the batch, and
  the map kind's own txid rule decides what its first run left in the values;
- the records of messages below the spout's committed offsets go (:meth:`~AppliedSources.
  prune`): a committed message is never replayed by the spout; and a tuple of one is
  skipped (a micro-batch that Spark runs again may bring it back): its tree completed, so
  the task applied it. The committed offsets a task has seen are kept with its records
  (:class:`TaskMark`) and never lowered, so a worker with an older view of them cannot
  apply a message whose record another worker let go.

What is applied together is what one execution upstream sent the task: past the first
bolt, a message's tuples for one task come from several upstream tasks, so a record's
source then also names the path of the tuple whose execution emitted them (``source/path``:
:func:`squall.core.reliability.lineage.unit`; the first bolt's output is recorded by
source alone).

Sound when the tuples one execution emits for one task arrive in one record (an executor
flushes them together) and bolts are deterministic (a replayed message's tuples are the
same children, in the same order, of the same inputs; routing may differ), as Trident's
transactional state assumes of its batches. A rebalance that moves keys to other tasks
drains the trees in flight first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from squall.core.errors import StateError
from squall.core.reliability.lineage import unit_source
from squall.core.reliability.unique import unique

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BatchRecord:
    """The source messages batch ``txid`` applied in one task: source -> sorted offsets."""

    txid: int
    offsets: Mapping[str, I64]

    def encode(self) -> bytes:
        """JSON, each source's offsets as runs ``[first, last, first, last, ...]`` or, where
        that is shorter, as a bitmap ``[first, base64 of one bit per offset from first]``:
        a shuffle grouping sends a task every other message, a run each, and the bitmap
        is then some twenty times smaller and faster to read."""
        runs: dict[str, list[int]] = {}
        bits: dict[str, list[int | str]] = {}
        for s, o in sorted(self.offsets.items()):
            if not o.size:
                continue
            o = unique(o)
            n_runs = int(np.count_nonzero(np.diff(o) != 1)) + 1
            span = int(o[-1]) - int(o[0]) + 1
            if n_runs * 2 * (len(str(int(o[-1]))) + 2) <= span // 6 + 8:
                runs[s] = _runs(o)
            else:
                bits[s] = _bits(o)
        doc: dict[str, object] = {"txid": self.txid, "runs": runs}
        if bits:
            doc["bits"] = bits
        return json.dumps(doc).encode()

    @classmethod
    def decode(cls, raw: bytes) -> BatchRecord:
        try:
            doc = json.loads(raw)
            offsets = {str(s): _unruns(r) for s, r in doc["runs"].items()}
            offsets.update((str(s), _unbits(b)) for s, b in doc.get("bits", {}).items())
            return cls(int(doc["txid"]), offsets)
        except (ValueError, KeyError, TypeError) as e:
            raise StateError(f"a stored batch record is malformed ({e}): {raw[:80]!r}") from None

    def below(self, committed: Mapping[str, int]) -> bool:
        """Every message in it is below its source's committed offset."""
        return all(o.size == 0 or int(o[-1]) < committed.get(unit_source(s), -1)
                   for s, o in self.offsets.items())


@dataclass(frozen=True)
class TaskMark:
    """A task's last committed batch and its floors: per source, the spout's committed
    offset as the task last saw it (never lowered). A message below its floor has a
    complete tree, so the task applied it: its tuples are skipped, and its records can go."""

    txid: int = 0
    floors: Mapping[str, int] = field(default_factory=dict)
    #: how many batches the task has committed: a worker that wrote the mark with this
    #: turn knows the records as they are (a txid repeats when Spark runs a batch again)
    turn: int = 0

    def encode(self) -> bytes:
        return json.dumps({"txid": self.txid, "floors": dict(sorted(self.floors.items())),
                           "turn": self.turn}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> TaskMark:
        try:
            doc = json.loads(raw)
            return cls(int(doc["txid"]), {str(s): int(o) for s, o in doc["floors"].items()},
                       int(doc.get("turn", 0)))  # marks written before turns: 0
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise StateError(f"a stored task mark is malformed ({e}): {raw[:80]!r}") from None

    def raised(self, txid: int, committed: Mapping[str, int]) -> TaskMark:
        """After batch ``txid``, with the spout's committed offsets as now seen."""
        floors = dict(self.floors)
        for s, o in committed.items():
            floors[s] = max(floors.get(s, o), o)
        return TaskMark(txid, floors, self.turn + 1)


class AppliedSources:
    def __init__(self, records: Iterable[BatchRecord] = ()) -> None:
        self.records: dict[int, BatchRecord] = {r.txid: r for r in records}
        self._merged: dict[str, I64] | None = None

    def begin(self, txid: int) -> list[int]:
        """Batch ``txid`` starts: the txids whose records are forgotten (delete them)."""
        gone = sorted(t for t in self.records if t >= txid)
        for t in gone:
            del self.records[t]
        if gone:
            self._merged = None
        return gone

    def fresh(self, source: str, offsets: I64) -> npt.NDArray[np.bool_]:
        """Which of these tuples' messages (of ``source``) no earlier batch applied."""
        done = self._by_source().get(source)
        if done is None or not done.size:
            return np.ones(offsets.size, np.bool_)
        # done is sorted and unique: a binary search per tuple, no hashing
        at = np.minimum(np.searchsorted(done, offsets), done.size - 1)
        fresh: npt.NDArray[np.bool_] = done[at] != offsets
        return fresh

    def applied(self, txid: int, offsets: Mapping[str, I64]) -> BatchRecord:
        """Batch ``txid`` applied these messages: its record (store it with the values)."""
        if self.records and max(self.records) >= txid:
            raise StateError(f"batch {txid} recorded after batch {max(self.records)}: "
                             "begin(txid) first")
        rec = BatchRecord(txid, {s: unique(o) for s, o in offsets.items() if o.size})
        self.records[txid] = rec
        if self._merged is not None:  # merged in, not rebuilt: a batch adds to many
            for s, o in rec.offsets.items():
                old = self._merged.get(s)
                both = o if old is None else np.concatenate([old, o])
                # a source's new offsets are above its earlier ones, but for replays
                self._merged[s] = both if old is None or o[0] > old[-1] else np.sort(both)
        return rec

    def prune(self, committed: Mapping[str, int]) -> list[int]:
        """Forget records whose messages are all committed: the txids to delete."""
        gone = sorted(t for t, r in self.records.items() if r.below(committed))
        for t in gone:
            del self.records[t]
        if gone:
            self._merged = None
        return gone

    def _by_source(self) -> dict[str, I64]:
        if self._merged is None:
            parts: dict[str, list[I64]] = {}
            for r in self.records.values():
                for s, o in r.offsets.items():
                    parts.setdefault(s, []).append(o)
            # Records are disjoint (a message is applied once) and each sorted: a sort, no
            # dedup, makes the merged view fresh() searches.
            self._merged = {s: p[0] if len(p) == 1 else np.sort(np.concatenate(p))
                            for s, p in parts.items()}
        return self._merged


def _runs(o: I64) -> list[int]:
    breaks = np.flatnonzero(np.diff(o) != 1)
    firsts = np.concatenate([o[:1], o[breaks + 1]])
    lasts = np.concatenate([o[breaks], o[-1:]])
    runs: list[int] = np.column_stack([firsts, lasts]).reshape(-1).tolist()
    return runs


def _unruns(runs: list[int]) -> I64:
    if len(runs) % 2:
        raise ValueError(f"runs {runs[:6]} do not pair up")
    parts = [np.arange(a, b + 1, dtype=np.int64) for a, b in zip(runs[::2], runs[1::2],
                                                                 strict=True)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _bits(o: I64) -> list[int | str]:
    first = int(o[0])
    present = np.zeros(int(o[-1]) - first + 1, np.bool_)
    present[o - first] = True
    return [first, base64.b64encode(np.packbits(present).tobytes()).decode()]


def _unbits(b: list[int | str]) -> I64:
    first, packed = b
    if not isinstance(first, int) or not isinstance(packed, str):
        raise ValueError(f"bitmap {str(b)[:40]} is not [first, base64]")
    present = np.unpackbits(np.frombuffer(base64.b64decode(packed, validate=True), np.uint8))
    return np.flatnonzero(present).astype(np.int64) + first
