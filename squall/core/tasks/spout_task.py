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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from squall.core.errors import SchemeError
from squall.core.reliability.ids import IdBatcher, derive_roots, full_offsets, root_keys
from squall.core.reliability.offsets import GiveUp, OffsetManager, Retry, Whereabouts
from squall.core.reliability.records import Outcome, Results
from squall.core.reliability.retry import RetrySchedule
from squall.core.tasks.spout_effects import Emission, Settled, Undeliverable
from squall.core.tasks.spout_emitter import Emitter
from squall.core.tasks.spout_recovery import RestartRecovery
from squall.core.topology.grouping import Edge
from squall.core.topology.model import Guarantee
from squall.core.wire.columns import to_columns
from squall.core.wire.scheme import Scheme, deserialize_columns

I64 = npt.NDArray[np.int64]


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


class SpoutTask:
    def __init__(self, cfg: SpoutConfig, committed: Sequence[int], salt: int,
                 old_salts: Sequence[int] = (), recovered_roots: set[int] | None = None,
                 ids: IdBatcher | None = None,
                 lettered: set[tuple[int, int]] | None = None,
                 sources: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.salt = salt
        self.sources = list(sources)  # "topic:partition": the origin its tuples carry
        self.offsets = [OffsetManager(c, cfg.retry, cfg.max_uncommitted) for c in committed]
        self.emitter = Emitter(cfg.component, cfg.task, cfg.scheme, cfg.edges, ids)
        # In-flight trees live in the offset managers' tables; a result's root says which
        # (source, offset, attempt) it is (squall.core.reliability.ids.root_keys). The backstop
        # scans them no sooner than this (a lower bound of the oldest emit time + 2 timeouts).
        self._next_expire_ms: int | None = None
        self._seek: dict[int, int] = {}  # source -> offset to re-read from
        # Where each done-but-uncommitted offset's result sits in the results partition:
        # the results position committed is the smallest, so a restart re-reads them.
        # Per source: (results offset, highest source offset it acked), in arrival order.
        self._done_at: list[deque[tuple[int, int]]] = [deque() for _ in committed]
        # Why each offset's last tree failed, for "where is my message?" (a few per source:
        # dropped once the offset is committed).
        self._why: dict[tuple[int, int], str] = {}
        self._recovery = RestartRecovery(
            committed, old_salts, recovered_roots, lettered,
            attempts=(cfg.retry.max_retries or 0) + 1,
            window=cfg.max_uncommitted or 100_000)

    # ----- queries -------------------------------------------------------

    @property
    def pending(self) -> int:
        """Trees in flight (what max spout pending caps)."""
        return sum(om.in_flight for om in self.offsets) if self.cfg.tracked else 0

    def whereabouts(self, source: int, offset: int) -> tuple[Whereabouts, int | None, str]:
        """Where ``offset`` of source ``source`` is; the root of its tree in flight (pending),
        and why its last tree failed ("" if none did)."""
        w = self.offsets[source].whereabouts(offset)
        root = int(derive_roots(self.salt, source, [offset], [w.failures])[0]) \
            if w.state == "pending" and self.cfg.tracked else None
        return w, root, self._why.get((source, offset), "")

    def pending_roots(self) -> list[int]:
        """Roots in flight, oldest deadline first."""
        found: list[tuple[int, int]] = []
        for src, om in enumerate(self.offsets):
            offs, attempts, stamps = om.in_flight_offsets()
            roots = derive_roots(self.salt, src, offs, attempts)
            found += zip(stamps.tolist(), roots.tolist(), strict=True)
        return [r for _, r in sorted(found, key=lambda sr: sr[0])]

    def at_max_pending(self) -> bool:
        return self.cfg.max_pending is not None and self.pending >= self.cfg.max_pending

    def blocked(self, now_ms: int) -> set[int]:
        """Sources not to poll now: max spout pending, or the uncommitted cap (retries do
        not need a poll: :meth:`retries`)."""
        if self.at_max_pending():
            return set(range(len(self.offsets)))
        return {s for s, om in enumerate(self.offsets) if om.at_capacity()}

    def commits(self) -> dict[int, int]:
        """Sources whose commit point moved: source -> offset to commit."""
        out = {}
        for s, om in enumerate(self.offsets):
            nxt = om.next_commit_offset()
            if nxt is not None:
                out[s] = nxt
        return out

    def retries(self, now_ms: int) -> dict[int, list[int]]:
        """Failed offsets whose retry is due, by source: re-emit them from the messages kept
        in the offset tables (:meth:`on_records` with ``rewind=False``).

        Storm's KafkaSpout seeks back and re-reads everything after a failed offset; with
        a failure every few hundred messages that re-read the partition over and over
        and starved it (here: commits stalled at 1,000 sentences/s with 0.5 % poison).
        """
        out = {}
        for s, om in enumerate(self.offsets):
            due = om.due_retries(now_ms)
            if due:
                out[s] = due
        return out

    def take_seeks(self, now_ms: int) -> dict[int, int]:
        """Re-read requests for unblocked sources: rewinds after a cap cut a read short."""
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
        # Not only the fronts: a dead letter's marker may come before results read later.
        return min((at for d in self._done_at for at, _ in d), default=position)

    def passed(self, source: int, position: int) -> None:
        """The source's reader stands at ``position`` (its consumer's position): offsets
        before it that held no record may be committed past. Not while a re-read is due:
        records before that position were then left out (:meth:`request_seek`)."""
        if source not in self._seek and position >= 0:
            self.offsets[source].passed(position)

    def committed(self, source: int, offset: int) -> None:
        self.offsets[source].committed(offset)
        if self._why:
            self._why = {k: v for k, v in self._why.items() if k[0] != source or k[1] >= offset}
        d = self._done_at[source]
        while d and d[0][1] < offset:  # conservative: a batch stays until all of it is committed
            d.popleft()

    def on_records(self, source: int, offsets: Sequence[int], values: Sequence[bytes | None],
                   payloads: Sequence[Any], now_ms: int, rewind: bool = True) -> Emission:
        """Emit what is due among records read from one source (in offset order).

        Offsets emitted before (retries from :meth:`retries`, or a re-read) are
        emitted only if their retry is due; new offsets are emitted in bulk up to
        the caps, and reading is rewound to the first one left out.
        """
        out = Emission()
        n = len(offsets)
        if not n:
            return out
        om = self.offsets[source]
        tracked = self.cfg.tracked
        room = self.cfg.max_pending - self.pending \
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
                if rewind:  # a re-read cut short: read again from here (retries wait instead)
                    self.request_seek(source, o)
                return self._finish(source, rows, chosen, attempts, offsets, payloads,
                                    now_ms, out)
            attempt = om.failures(o)
            om.emitted(o, now_ms)
            self._decode(source, i, attempt, offsets, values, payloads, rows, chosen, attempts,
                         out)
        if first_new < n:  # new offsets: in bulk
            take = min(n - first_new, max(room - len(chosen), 0))
            if om.max_uncommitted is not None:
                take = min(take, max(om.max_uncommitted - om.num_uncommitted, 0))
            new = list(offsets[first_new:first_new + take])
            if take < n - first_new:
                self.request_seek(source, offsets[first_new + take])
            om.emitted_new(new, now_ms, payloads[first_new:first_new + take])
            recovered = self._recovery.done(source, new,
                                            [m.fetched_end for m in self.offsets])
            if not recovered and not chosen:
                try:  # the common case: a run of new offsets, decoded column-wise
                    cols, bulk = deserialize_columns(self.cfg.scheme,
                                                     values[first_new:first_new + take])
                except SchemeError:
                    pass  # one is bad: decode them one by one below
                else:
                    out.emitted = take
                    if take:
                        self._emit(source, cols, bulk, new, [0] * take, now_ms, out)
                    return out
            for i in range(first_new, first_new + take):
                if recovered and offsets[i] in recovered:
                    om.acked(offsets[i])  # acked before the restart: not emitted again
                    out.recovered += 1
                    continue
                self._decode(source, i, 0, offsets, values, payloads, rows, chosen,
                             attempts, out)
        return self._finish(source, rows, chosen, attempts, offsets, payloads, now_ms, out)

    def _decode(self, source: int, i: int, attempt: int, offsets: Sequence[int],
                values: Sequence[bytes | None], payloads: Sequence[Any],
                rows: list[tuple[Any, ...]], chosen: list[int], attempts: list[int],
                out: Emission) -> None:
        scheme = self.cfg.scheme
        try:
            vals = tuple(scheme.deserialize(values[i] or b""))
            if len(vals) != len(scheme.fields):
                raise SchemeError(f"scheme gave {len(vals)} values for fields {scheme.fields}")
        except SchemeError as e:
            reason = str(e) if str(e).startswith("scheme gave") else f"undecodable: {e}"
            self._letter(source, i, offsets, payloads, reason, out)
            return
        except Exception as e:  # a user scheme's own failure is the record's, not the spout's
            self._letter(source, i, offsets, payloads,
                         f"undecodable: {type(e).__name__}: {e}", out)
            return
        rows.append(vals)
        chosen.append(i)
        attempts.append(attempt)

    def _letter(self, source: int, i: int, offsets: Sequence[int], payloads: Sequence[Any],
                reason: str, out: Emission) -> None:
        om = self.offsets[source]
        out.letters.append(Undeliverable(source, offsets[i], payloads[i], reason,
                                  om.give_up(offsets[i]).failures))

    def _finish(self, source: int, rows: list[tuple[Any, ...]], chosen: list[int],
                attempts: list[int], offsets: Sequence[int], payloads: Sequence[Any],
                now_ms: int, out: Emission) -> Emission:
        columns, bad = to_columns(self.cfg.scheme.fields, rows) if chosen else ({}, {})
        if bad:  # values that cannot share a column with the others: dead letters
            for k, reason in bad.items():
                self._letter(source, chosen[k], offsets, payloads, f"undecodable: {reason}",
                             out)
            keep = [k for k in range(len(chosen)) if k not in bad]
            rows = [rows[k] for k in keep]
            chosen = [chosen[k] for k in keep]
            attempts = [attempts[k] for k in keep]
        out.emitted = len(chosen)
        out.replayed = sum(1 for a in attempts if a > 0)
        if chosen:
            self._emit(source, columns, rows, [offsets[i] for i in chosen], attempts, now_ms,
                       out)
        return out

    def _emit(self, src: int, columns: dict[str, pa.Array], rows: list[tuple[Any, ...]] | None,
              offs: list[int], attempts: list[int], now_ms: int, out: Emission) -> None:
        roots = None
        if not self.cfg.tracked:
            self.offsets[src].acked_many(offs)  # acked at once (no ackers, at-most-once, ...)
        else:
            roots = derive_roots(self.salt, src, np.asarray(offs, np.int64),
                                 np.asarray(attempts, np.int64))
            if self._next_expire_ms is None:
                self._next_expire_ms = now_ms + 2 * self.cfg.timeout_ms
        origin = (self.sources[src], np.asarray(offs, np.int64)) if self.sources else None
        out.tuples, out.inits = self.emitter.emit(columns, rows, len(offs), roots, now_ms,
                                                  origin)

    def on_results(self, results: Results, now_ms: int, results_offset: int = 0,
                   reasons: Mapping[int, str] | None = None) -> Settled:
        """Apply results read at ``results_offset`` of this task's results partition;
        ``reasons``: why failed roots failed, where a bolt said (what their dead letters
        will say)."""
        out = Settled()
        if not len(results):
            return out
        srcs, attempts, low = root_keys(self.salt, results.roots)
        outcomes = results.outcomes
        lats = []
        known = srcs < len(self.offsets)
        out.stale += int(np.count_nonzero(~known))
        for src in np.unique(srcs[known]).tolist():
            om = self.offsets[src]
            mine = srcs == src
            offs = full_offsets(low[mine], om.committed_offset)
            att, oc = attempts[mine], outcomes[mine]
            acked = oc == Outcome.ACKED
            if acked.any():
                lat = om.settle_acks(offs[acked], att[acked], now_ms)
                out.stale += int(np.count_nonzero(acked)) - lat.size
                if lat.size:
                    lats.append(lat)
                    out.acked += lat.size
                    self._done_at[src].append((results_offset, int(offs[acked].max())))
            reset = oc == Outcome.RESET
            if reset.any():
                out.stale += int(np.count_nonzero(reset)) - om.reset_timeouts(
                    offs[reset], att[reset], now_ms)
            for i in np.flatnonzero(~acked & ~reset).tolist():  # failures: rare, one by one
                off = int(offs[i])
                if not om.is_in_flight(off, int(att[i])):
                    out.stale += 1  # a duplicate, or a tree the backstop already failed
                    continue
                reason = "timeout" if oc[i] == Outcome.TIMED_OUT else "failed"
                why = reasons.get(int(results.roots[mine][i])) if reasons else None
                self._fail(src, off, reason, now_ms, out, why)
        if lats:
            out.latencies_ms = np.concatenate(lats)
        return out

    def expire(self, now_ms: int, clock_ms: int | None = None) -> Settled:
        """The backstop: trees pending for twice the message timeout fail here.

        Ages are judged on ``clock_ms`` (default ``now_ms``): the service passes
        the ackers' timeout clock, so the backstop, like the acker, does not count
        time the trees' tuples spent queued for slow bolts (squall/core/reliability/progress.py).
        """
        out = Settled()
        at = now_ms if clock_ms is None else clock_ms
        if self._next_expire_ms is None or at < self._next_expire_ms:
            return out
        limit = at - 2 * self.cfg.timeout_ms
        oldest = None
        for src, om in enumerate(self.offsets):
            offs, _, stamps = om.in_flight_offsets()
            for off in offs[stamps <= limit].tolist():
                # "backstop": no result from the acker within 2x the message timeout.
                self._fail(src, off, "backstop", now_ms, out)
            left = stamps[stamps > limit]
            if left.size:
                oldest = min(int(left.min()), oldest if oldest is not None else at)
        self._next_expire_ms = None if oldest is None else oldest + 2 * self.cfg.timeout_ms
        return out

    def _fail(self, src: int, off: int, reason: str, now_ms: int, out: Settled,
              why: str | None = None) -> None:
        """``reason``: the kind (failed, timeout, backstop); ``why``: what the bolt said."""
        om = self.offsets[src]
        out.failed[reason] = out.failed.get(reason, 0) + 1
        decision = om.failed(off, now_ms)
        if decision is not None:
            self._why[(src, off)] = f"{reason}: {why}" if why else reason
        if isinstance(decision, Retry):
            out.retries += 1
        elif isinstance(decision, GiveUp):
            said = f"{reason} after {decision.failures} attempts"
            out.letters.append(Undeliverable(src, off, om.payload(off),
                                             f"{said}: {why}" if why else said,
                                             decision.failures))

    def dead_lettered(self, letter: Undeliverable, marker_offset: int | None = None) -> None:
        """The dead letter is confirmed by Kafka: the offset is done. ``marker_offset``:
        where its marker sits in the results partition (kept until the offset commits, so
        a restart finds it)."""
        self.offsets[letter.source].acked(letter.offset)
        if marker_offset is not None:
            self._done_at[letter.source].append((marker_offset, letter.offset))

