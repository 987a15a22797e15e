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

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np
import pyarrow as pa

from squall.grouping import Edge, Router
from squall.ids import IdBatcher, derive_roots
from squall.offsets import DeadLetter, OffsetManager, Retry
from squall.records import AckerBatch, Outcome, RecordKind, Results
from squall.retry import RetrySchedule
from squall.scheme import Scheme, SchemeError
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


@dataclass(frozen=True, slots=True)
class Record:
    """One source message. ``source`` indexes the task's list of source partitions."""

    source: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any = None


@dataclass(slots=True)
class _Pending:
    record: Record
    attempt: int
    emitted_ms: int


@dataclass(frozen=True, slots=True)
class Letter:
    """A message to dead-letter, then confirm with :meth:`SpoutTask.dead_lettered`."""

    record: Record
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
        self._done_at: dict[tuple[int, int], int] = {}
        self._old_salts = list(old_salts)
        self._recovered = recovered_roots or set()
        self._attempts = (cfg.retry.max_retries or 0) + 1
        window = cfg.max_uncommitted or 100_000  # how far the old incarnation can have emitted
        self._recover_below = [c + window for c in committed]

    # ----- queries -------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._pending)

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
        return min(self._done_at.values(), default=position)

    def committed(self, source: int, offset: int) -> None:
        self.offsets[source].committed(offset)
        for key in [k for k in self._done_at if k[0] == source and k[1] < offset]:
            del self._done_at[key]

    def on_records(self, records: Sequence[Record], now_ms: int) -> Emission:
        """Emit what is due among records read (one source, offset order)."""
        out = Emission()
        if not records:
            return out
        src = records[0].source
        om = self.offsets[src]
        rows: list[tuple[Any, ...]] = []
        chosen: list[tuple[Record, int]] = []  # (record, attempt)
        recovered = self._recovered_offsets(src, records)
        room = (self.cfg.max_pending - len(self._pending)) if self.cfg.max_pending else None
        for r in records:
            if not om.should_emit(r.offset, now_ms):
                continue
            new = r.offset >= om.fetched_end
            full = room is not None and self.cfg.tracked and len(chosen) >= room
            if full or (new and om.at_capacity()):
                self.request_seek(src, r.offset)
                break
            attempt = om.failures(r.offset)
            om.emitted(r.offset)
            if r.offset in recovered:
                om.acked(r.offset)  # acked before the restart: done, not emitted again
                out.recovered += 1
                continue
            try:
                values = self.cfg.scheme.deserialize(r.value or b"")
            except SchemeError as e:
                out.letters.append(Letter(r, f"undecodable: {e}", om.give_up(r.offset).failures))
                continue
            if len(values) != len(self.cfg.scheme.fields):
                reason = f"scheme gave {len(values)} values for fields {self.cfg.scheme.fields}"
                out.letters.append(Letter(r, reason, om.give_up(r.offset).failures))
                continue
            rows.append(values)
            chosen.append((r, attempt))
            out.replayed += attempt > 0
        out.emitted = len(chosen)
        if chosen:
            self._emit(src, rows, chosen, now_ms, out)
        return out

    def _emit(self, src: int, rows: list[tuple[Any, ...]], chosen: list[tuple[Record, int]],
              now_ms: int, out: Emission) -> None:
        n = len(rows)
        offsets = np.fromiter((r.offset for r, _ in chosen), np.int64, n)
        om = self.offsets[src]
        if not self.cfg.tracked:
            for r, _ in chosen:  # acked at once (no ackers, at-most-once, no guarantee)
                om.acked(r.offset)
            roots = np.zeros(n, np.uint64)
            edges = np.zeros((n, max(self._copies, 1)), np.uint64)
        else:
            attempts = np.fromiter((a for _, a in chosen), np.int64, n)
            roots = derive_roots(self.salt, src, offsets, attempts)
            edges = self._ids.ids(n * self._copies).reshape(n, self._copies) if self._copies \
                else np.zeros((n, 0), np.uint64)
            init_vals = np.bitwise_xor.reduce(edges, axis=1) if self._copies \
                else np.zeros(n, np.uint64)
            out.inits = AckerBatch(roots, init_vals, np.full(n, RecordKind.INIT, np.uint8),
                                   np.full(n, self.cfg.task, np.uint16),
                                   np.full(n, now_ms, np.int64))
            for (r, a), root in zip(chosen, roots.tolist(), strict=True):
                self._pending[root] = _Pending(r, a, now_ms)
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

    def _recovered_offsets(self, src: int, records: Sequence[Record]) -> set[int]:
        """Offsets among ``records`` whose root (under an old salt) was acked before a restart."""
        if not self._recovered:
            return set()
        offs = np.fromiter((r.offset for r in records if r.offset < self._recover_below[src]),
                           np.int64)
        if offs.size < len(records) and all(
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
        for root, outcome in zip(results.roots.tolist(), results.outcomes.tolist(), strict=True):
            p = self._pending.get(root)
            if p is None:
                out.stale += 1  # a duplicate, or a tree the backstop already failed
                continue
            if outcome == Outcome.RESET:
                del self._pending[root]  # re-insert: the dict stays in deadline order
                p.emitted_ms = now_ms
                self._pending[root] = p
                continue
            del self._pending[root]
            src, off = p.record.source, p.record.offset
            if outcome == Outcome.ACKED:
                self.offsets[src].acked(off)
                self._done_at[(src, off)] = results_offset
                out.acked += 1
                out.latencies_ms.append(now_ms - p.emitted_ms)
            else:
                reason = "timeout" if outcome == Outcome.TIMED_OUT else "failed"
                self._fail(p, reason, now_ms, out)
        return out

    def expire(self, now_ms: int) -> Settled:
        """The backstop: trees pending for twice the message timeout fail here."""
        out = Settled()
        limit = now_ms - 2 * self.cfg.timeout_ms
        expired = []
        for root, p in self._pending.items():
            if p.emitted_ms > limit:
                break
            expired.append(root)
        for root in expired:
            p = self._pending.pop(root)
            self._fail(p, "timeout (no result from the acker)", now_ms, out)
        return out

    def _fail(self, p: _Pending, reason: str, now_ms: int, out: Settled) -> None:
        out.failed[reason] = out.failed.get(reason, 0) + 1
        decision = self.offsets[p.record.source].failed(p.record.offset, now_ms)
        if isinstance(decision, Retry):
            out.retries += 1
        elif isinstance(decision, DeadLetter):
            out.letters.append(Letter(p.record, f"{reason} after {decision.failures} attempts",
                                      decision.failures))

    def dead_lettered(self, letter: Letter) -> None:
        """The dead letter is confirmed by Kafka: the offset is done."""
        self.offsets[letter.record.source].acked(letter.record.offset)
