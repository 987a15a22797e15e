"""One spout task: source partitions in, tuples and inits out, offsets committed on completion.

Pure (no Kafka): the service feeds it records and results and carries out
what it returns. Storm's ``KafkaSpout`` is the model; where it fails its users
this does better:
- a message past its retries is dead-lettered (with reason and attempt count)
  and then counts as done: no partition stalls behind a poison record;
- a message the scheme cannot decode is dead-lettered at once;
- after a restart, offsets whose trees were acked after the last commit are
  recognised (their roots are re-derived from the old incarnation's salt) and
  not emitted again;
- the spout times out its own pending trees after twice the message timeout,
  a backstop for a dead acker.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa

from squall.grouping import Edge, Router
from squall.ids import IdBatcher, derive_roots
from squall.offsets import DeadLetter, OffsetManager, Retry
from squall.records import AckerBatch, Outcome, RecordKind, Results
from squall.retry import RetrySchedule
from squall.scheme import Scheme, SchemeError, deserialize_many
from squall.wire import TupleBatch


class Guarantee(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    AT_MOST_ONCE = "at_most_once"
    NO_GUARANTEE = "no_guarantee"


@dataclass(frozen=True)
class SpoutConfig:
    task: int
    component: str
    scheme: Scheme
    edges: tuple[Edge, ...]
    num_ackers: int
    timeout_ms: int
    retry: RetrySchedule = field(default_factory=RetrySchedule)
    max_pending: int | None = None
    max_uncommitted: int | None = None
    guarantee: Guarantee = Guarantee.AT_LEAST_ONCE

    @property
    def tracked(self) -> bool:
        return self.guarantee is Guarantee.AT_LEAST_ONCE and self.num_ackers > 0


# A pending tree: (source, offset, attempt, emitted_ms, payload). ``payload`` is
# whatever the service passed with the record (a Kafka message): it is handed
# back in a Letter if the message must be dead-lettered.
_Pending = tuple[int, int, int, int, Any]


@dataclass(frozen=True, slots=True)
class Letter:
    """A message to dead-letter, then confirm with :meth:`SpoutTask.dead_lettered`."""

    source: int
    offset: int
    payload: Any
    reason: str
    attempts: int


@dataclass
class Emission:
    """What the service must produce for one batch of records."""

    tuples: list[tuple[str, int, TupleBatch]] = field(default_factory=list)
    inits: AckerBatch = field(default_factory=AckerBatch.empty)
    letters: list[Letter] = field(default_factory=list)
    emitted: int = 0
    replayed: int = 0
    recovered: int = 0


@dataclass
class Settled:
    """What a batch of results (or the backstop) decided."""

    acked: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    latencies_ms: list[int] = field(default_factory=list)
    letters: list[Letter] = field(default_factory=list)
    stale: int = 0


class SpoutTask:
    def __init__(self, cfg: SpoutConfig, committed: Sequence[int], salt: int,
                 old_salts: Sequence[int] = (), recovered_roots: set[int] | None = None,
                 ids: IdBatcher | None = None) -> None:
        self.cfg = cfg
        self.salt = salt
        self.offsets = [OffsetManager(c, cfg.retry, cfg.max_uncommitted) for c in committed]
        self.routers = [Router.for_edge(e, cfg.scheme.fields) for e in cfg.edges]
        self._copies = sum(e.copies for e in cfg.edges)
        self._ids = ids or IdBatcher()
        self._pending: dict[int, _Pending] = {}  # root -> entry, in deadline order
        self._seek: dict[int, int] = {}  # source -> offset to re-read from
        # Where each done-but-uncommitted offset's result sits in the results partition:
        # the results position committed is the smallest, so a restart re-reads them.
        # Per source: (results offset, highest source offset it acked), in arrival order.
        self._done_at: list[deque[tuple[int, int]]] = [deque() for _ in committed]
        self._old_salts = list(old_salts)
        self._recovered = recovered_roots or set()
        self._attempts = (cfg.retry.max_retries or 0) + 1
        window = cfg.max_uncommitted or 100_000  # how far the old incarnation can have emitted
        self._recover_below = [c + window for c in committed]

    # ----- queries -------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._pending)

    def pending_roots(self) -> list[int]:
        """Roots in flight, oldest deadline first."""
        return list(self._pending)

    def at_max_pending(self) -> bool:
        return self.cfg.max_pending is not None and len(self._pending) >= self.cfg.max_pending

    def blocked(self, now_ms: int) -> set[int]:
        """Sources not to poll now: max spout pending, or uncommitted cap with no retry due."""
        if self.at_max_pending():
            return set(range(len(self.offsets)))
        return {s for s, om in enumerate(self.offsets)
                if om.at_capacity() and om.retry_due(now_ms) is None}

    def commits(self) -> dict[int, int]:
        """Sources whose commit point moved: source -> offset to commit."""
        out = {}
        for s, om in enumerate(self.offsets):
            nxt = om.next_commit_offset()
            if nxt is not None:
                out[s] = nxt
        return out

    def take_seeks(self, now_ms: int) -> dict[int, int]:
        """Re-read requests for unblocked sources: due retries and rewinds after a cap."""
        for s, om in enumerate(self.offsets):
            due = om.retry_due(now_ms)
            if due is not None:
                self._seek[s] = min(due, self._seek.get(s, due))
        blocked = self.blocked(now_ms)
        out = {s: o for s, o in self._seek.items() if s not in blocked}
        for s in out:
            del self._seek[s]
        return out

    # ----- effects -------------------------------------------------------

    def request_seek(self, source: int, offset: int) -> None:
        self._seek[source] = min(offset, self._seek.get(source, offset))

    def results_position(self, position: int) -> int:
        """The results offset to commit: the earliest result of an uncommitted done offset."""
        fronts = [d[0][0] for d in self._done_at if d]
        return min(fronts, default=position)

    def committed(self, source: int, offset: int) -> None:
        self.offsets[source].committed(offset)
        d = self._done_at[source]
        while d and d[0][1] < offset:  # conservative: a batch stays until all of it is committed
            d.popleft()

    def on_records(self, source: int, offsets: Sequence[int], values: Sequence[bytes | None],
                   payloads: Sequence[Any], now_ms: int) -> Emission:
        """Emit what is due among records read from one source (in offset order).

        Re-read offsets (after a seek back) are emitted only if their retry is
        due; new offsets are emitted in bulk up to the caps, and reading is
        rewound to the first one left out.
        """
        out = Emission()
        n = len(offsets)
        if not n:
            return out
        om = self.offsets[source]
        tracked = self.cfg.tracked
        room = self.cfg.max_pending - len(self._pending) \
            if (self.cfg.max_pending is not None and tracked) else n
        rows: list[tuple[Any, ...]] = []
        chosen: list[int] = []  # indexes into the inputs
        attempts: list[int] = []
        first_new = n
        for i in range(n):  # re-read offsets: one by one (rare: only after a seek back)
            o = offsets[i]
            if o >= om.fetched_end:
                first_new = i
                break
            if not om.should_emit(o, now_ms):
                continue
            if len(chosen) >= room:
                self.request_seek(source, o)
                return self._finish(source, rows, chosen, attempts, values, offsets, payloads,
                                    now_ms, out)
            attempt = om.failures(o)
            om.emitted(o)
            self._decode(source, i, attempt, offsets, values, payloads, rows, chosen, attempts,
                         out)
        if first_new < n:  # new offsets: in bulk
            take = min(n - first_new, max(room - len(chosen), 0))
            if om.max_uncommitted is not None:
                take = min(take, max(om.max_uncommitted - om.num_uncommitted, 0))
            new = list(offsets[first_new:first_new + take])
            if take < n - first_new:
                self.request_seek(source, offsets[first_new + take])
            om.emitted_new(new)
            recovered = self._recovered_offsets(source, new)
            bulk = None
            if not recovered and not rows:
                try:
                    bulk = deserialize_many(self.cfg.scheme, values[first_new:first_new + take])
                except SchemeError:
                    bulk = None  # one is bad: decode them one by one below
            if bulk is not None:
                rows.extend(bulk)
                chosen.extend(range(first_new, first_new + take))
                attempts.extend([0] * take)
            else:
                for i in range(first_new, first_new + take):
                    if recovered and offsets[i] in recovered:
                        om.acked(offsets[i])  # acked before the restart: not emitted again
                        out.recovered += 1
                        continue
                    self._decode(source, i, 0, offsets, values, payloads, rows, chosen,
                                 attempts, out)
        return self._finish(source, rows, chosen, attempts, values, offsets, payloads, now_ms, out)

    def _decode(self, source: int, i: int, attempt: int, offsets: Sequence[int],
                values: Sequence[bytes | None], payloads: Sequence[Any],
                rows: list[tuple[Any, ...]], chosen: list[int], attempts: list[int],
                out: Emission) -> None:
        scheme = self.cfg.scheme
        try:
            vals = scheme.deserialize(values[i] or b"")
            if len(vals) != len(scheme.fields):
                raise SchemeError(f"scheme gave {len(vals)} values for fields {scheme.fields}")
        except SchemeError as e:
            om = self.offsets[source]
            reason = str(e) if str(e).startswith("scheme gave") else f"undecodable: {e}"
            out.letters.append(Letter(source, offsets[i], payloads[i], reason,
                                      om.give_up(offsets[i]).failures))
            return
        rows.append(vals)
        chosen.append(i)
        attempts.append(attempt)

    def _finish(self, source: int, rows: list[tuple[Any, ...]], chosen: list[int],
                attempts: list[int], values: Sequence[bytes | None], offsets: Sequence[int],
                payloads: Sequence[Any], now_ms: int, out: Emission) -> Emission:
        out.emitted = len(chosen)
        out.replayed = sum(1 for a in attempts if a > 0)
        if chosen:
            self._emit(source, rows, [offsets[i] for i in chosen], attempts,
                       [payloads[i] for i in chosen], now_ms, out)
        return out

    def _emit(self, src: int, rows: list[tuple[Any, ...]], offs: list[int], attempts: list[int],
              payloads: list[Any], now_ms: int, out: Emission) -> None:
        n = len(rows)
        om = self.offsets[src]
        if not self.cfg.tracked:
            for o in offs:  # acked at once (no ackers, at-most-once, no guarantee)
                om.acked(o)
            roots = np.zeros(n, np.uint64)
            edges = np.zeros((n, max(self._copies, 1)), np.uint64)
        else:
            roots = derive_roots(self.salt, src, np.asarray(offs, np.int64),
                                 np.asarray(attempts, np.int64))
            edges = self._ids.ids(n * self._copies).reshape(n, self._copies) if self._copies \
                else np.zeros((n, 0), np.uint64)
            init_vals = np.bitwise_xor.reduce(edges, axis=1) if self._copies \
                else np.zeros(n, np.uint64)
            out.inits = AckerBatch(roots, init_vals, np.full(n, RecordKind.INIT, np.uint8),
                                   np.full(n, self.cfg.task, np.uint16),
                                   np.full(n, now_ms, np.int64))
            entries = zip(repeat(src), offs, attempts, repeat(now_ms), payloads)
            self._pending.update(zip(roots.tolist(), entries, strict=True))
        columns = {f: pa.array([row[c] for row in rows])
                   for c, f in enumerate(self.cfg.scheme.fields)}
        col = 0
        for edge, router in zip(self.cfg.edges, self.routers, strict=True):
            parts = router.route(rows)
            k = edge.copies
            rep = np.repeat(np.arange(n), k) if k > 1 else np.arange(n)
            ids = edges[:, col:col + k].reshape(-1) if self.cfg.tracked else None
            col += k
            for p in np.unique(parts).tolist():
                sel = np.flatnonzero(parts == p)
                rows_sel = rep[sel]
                take = pa.array(rows_sel)
                batch = TupleBatch.single_anchored(
                    {f: c.take(take) for f, c in columns.items()},
                    None if ids is None else roots[rows_sel],
                    None if ids is None else ids[sel],
                    stream=edge.stream, source=self.cfg.component, source_task=self.cfg.task)
                out.tuples.append((edge.topic, p, batch))

    def _recovered_offsets(self, src: int, offsets: list[int]) -> set[int]:
        """Offsets (new ones) whose root, under an old salt, was acked before a restart."""
        if not self._recovered:
            return set()
        limit = self._recover_below[src]
        offs = np.fromiter((o for o in offsets if o < limit), np.int64)
        if offs.size < len(offsets) and all(
                om.fetched_end >= lim for om, lim in zip(self.offsets, self._recover_below,
                                                         strict=True)):
            self._recovered.clear()  # past every window the old incarnation could reach
        found: set[int] = set()
        for salt in self._old_salts:
            for attempt in range(self._attempts):
                roots = derive_roots(salt, src, offs, np.full(offs.size, attempt, np.int64))
                for o, root in zip(offs.tolist(), roots.tolist(), strict=True):
                    if root in self._recovered:
                        self._recovered.discard(root)
                        found.add(o)
        return found

    def on_results(self, results: Results, now_ms: int, results_offset: int = 0) -> Settled:
        """Apply results read at ``results_offset`` of this task's results partition."""
        out = Settled()
        pending, lat = self._pending, out.latencies_ms
        acked = Outcome.ACKED
        by_src: dict[int, list[int]] = {}
        for root, outcome in zip(results.roots.tolist(), results.outcomes.tolist(), strict=True):
            p = pending.pop(root, None)
            if p is None:
                out.stale += 1  # a duplicate, or a tree the backstop already failed
                continue
            src, off, attempt, emitted_ms, payload = p
            if outcome == acked:
                if src in by_src:
                    by_src[src].append(off)
                else:
                    by_src[src] = [off]
                lat.append(now_ms - emitted_ms)
            elif outcome == Outcome.RESET:
                pending[root] = (src, off, attempt, now_ms, payload)  # at the end: deadline order
            else:
                reason = "timeout" if outcome == Outcome.TIMED_OUT else "failed"
                self._fail(p, reason, now_ms, out)
        for src, offs in by_src.items():
            self.offsets[src].acked_many(offs)
            self._done_at[src].append((results_offset, max(offs)))
            out.acked += len(offs)
        return out

    def expire(self, now_ms: int) -> Settled:
        """The backstop: trees pending for twice the message timeout fail here."""
        out = Settled()
        limit = now_ms - 2 * self.cfg.timeout_ms
        expired = []
        for root, p in self._pending.items():
            if p[3] > limit:
                break
            expired.append(root)
        for root in expired:
            # "backstop": no result from the acker within 2x the message timeout.
            self._fail(self._pending.pop(root), "backstop", now_ms, out)
        return out

    def _fail(self, p: _Pending, reason: str, now_ms: int, out: Settled) -> None:
        src, off, _, _, payload = p
        out.failed[reason] = out.failed.get(reason, 0) + 1
        decision = self.offsets[src].failed(off, now_ms)
        if isinstance(decision, Retry):
            out.retries += 1
        elif isinstance(decision, DeadLetter):
            out.letters.append(Letter(src, off, payload,
                                      f"{reason} after {decision.failures} attempts",
                                      decision.failures))

    def dead_lettered(self, letter: Letter) -> None:
        """The dead letter is confirmed by Kafka: the offset is done."""
        self.offsets[letter.source].acked(letter.offset)
