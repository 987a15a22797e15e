"""One acker task: the ledger of one acker partition, fed Kafka messages, no Kafka in sight.

Beyond Storm: the task knows the earliest offset of its partition that a
pending tree still needs (its *watermark*). The service commits it; after a
crash the task is rebuilt by re-reading from there, so trees in flight
survive an acker restart instead of all timing out and replaying.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from squall.core.errors import WireFormatError
from squall.core.reliability.ledger import Ledger
from squall.core.reliability.progress import TimeoutClock
from squall.core.reliability.records import AckerBatch, Outcome, Results
from squall.core.wire.internal import decode_acker_batch, decode_fail_reasons, decode_progress

# Seqs in the ledger are 32-bit offsets relative to a base; rebase well before they wrap.
_REBASE_AT = 1 << 31
#: Records the ledger takes at once (see :meth:`AckerTask.apply`): a caught-up acker's poll
#: holds a few messages of a few thousand records; a backlog's, hundreds of thousands.
RECORDS_PER_APPLY = 16_384
#: Fail reasons kept for trees not decided yet (the oldest go first): a bolt sends them
#: just before its fails, so they wait a poll or two, not for the ledger's timeouts.
MAX_REASONS = 100_000


@dataclass(frozen=True, slots=True)
class Message:
    """One Kafka message of the acker partition."""

    offset: int
    payload: bytes | None


@dataclass(frozen=True, slots=True)
class BadRecord:
    offset: int
    reason: str


@dataclass
class Applied:
    """What one call to :meth:`AckerTask.apply` did."""

    results: Results
    bad: list[BadRecord] = field(default_factory=list)
    #: records applied, by kind (index = RecordKind value; 0 unused)
    kinds: np.ndarray = field(default_factory=lambda: np.zeros(5, np.int64))


class AckerTask:
    """The ledger of acker partition ``task``, and where reading must resume."""

    def __init__(self, task: int, timeout_ms: int, start_offset: int, now_ms: int,
                 rotation_ms: int | None = None, gated: bool = False,
                 records_per_apply: int = RECORDS_PER_APPLY) -> None:
        """``gated``: timeouts wait for the bolts' progress marks
        (squall/core/reliability/progress.py)."""
        self.task = task
        self.records_per_apply = records_per_apply
        self.clock = TimeoutClock(gated)
        self.ledger = Ledger(timeout_ms, rotation_ms=rotation_ms, now_ms=now_ms)
        self._base = start_offset
        self._next = start_offset
        self._event_ms = 0
        self._orphans_reported = 0
        #: why roots were failed, as the bolts said (until their trees are decided)
        self.reasons: dict[int, str] = {}

    @property
    def next_offset(self) -> int:
        """One past the last message applied."""
        return self._next

    @property
    def event_time_ms(self) -> int:
        """The newest record timestamp applied: the partition's own clock."""
        return self._event_ms

    def watermark(self) -> int:
        """The earliest offset a pending tree still needs (commit this)."""
        low = self.ledger.low_seq()
        return self._next if low is None else self._base + low

    def apply(self, messages: Sequence[Message], now_ms: int) -> Applied:
        """Decode and apply messages in offset order; bad payloads are reported, not raised.

        The ledger takes them ``records_per_apply`` records at a time (whole messages): one
        poll of a backlog holds hundreds of thousands of records, and a ledger given them at
        once sized its table and its sort's arrays for all of them (what a poll holds is not
        the acker's to bound; what it works on at once is)."""
        if not messages:
            return Applied(Results.empty())
        parts: list[Results] = []
        batches: list[AckerBatch] = []
        offsets: list[int] = []
        held = 0
        bad: list[BadRecord] = []
        kinds = np.zeros(5, np.int64)
        for m in messages:
            if m.payload is None:
                bad.append(BadRecord(m.offset, "empty message (no value)"))
                continue
            try:
                mark = decode_progress(m.payload)
                if mark is not None:
                    self.clock.mark(*mark)
                    continue
                why = decode_fail_reasons(m.payload)
                if why is not None:
                    self._keep_reasons(why)
                    continue
                batches.append(decode_acker_batch(m.payload))
                offsets.append(m.offset)
            except WireFormatError as e:
                bad.append(BadRecord(m.offset, str(e)))
                continue
            held += len(batches[-1])
            if held >= self.records_per_apply:
                parts.append(self._apply(batches, offsets, kinds, now_ms))
                batches, offsets, held = [], [], 0
        parts.append(self._apply(batches, offsets, kinds, now_ms))
        self._next = messages[-1].offset + 1
        return Applied(Results.concat(parts), bad, kinds)

    def _apply(self, batches: list[AckerBatch], offsets: list[int], kinds: np.ndarray,
               now_ms: int) -> Results:
        """Messages' records (``offsets``: each message's) into the ledger; counts by kind
        added to ``kinds``."""
        batch = AckerBatch.concat(batches)
        if not len(batch):
            return Results.empty()
        kinds += np.bincount(batch.kinds, minlength=5).astype(np.int64)
        self._event_ms = max(self._event_ms, int(batch.ts_ms.max()))
        if offsets[0] - self._base >= _REBASE_AT:
            low = self.ledger.low_seq()
            delta = offsets[0] - self._base if low is None else low
            self.ledger.rebase_seq(delta)
            self._base += delta
        # Each record is tagged with its own message's offset, so the watermark
        # stays exact however many messages one poll returns.
        seq = np.repeat(np.asarray(offsets, np.int64) - self._base, [len(b) for b in batches])
        return self.ledger.apply(batch, now_ms, seq=seq)

    def _keep_reasons(self, why: dict[int, str]) -> None:
        self.reasons.update(why)
        for old in list(self.reasons)[:max(0, len(self.reasons) - MAX_REASONS)]:
            del self.reasons[old]

    def take_reasons(self, results: Results) -> dict[int, str]:
        """Why the failed trees of ``results`` failed, where a bolt said; the decided trees'
        reasons are let go."""
        if not self.reasons or not len(results):
            return {}
        out = {}
        for root, outcome in zip(results.roots.tolist(), results.outcomes.tolist(),
                                 strict=True):
            why = self.reasons.pop(root, None) if outcome != Outcome.RESET else None
            if why is not None and outcome == Outcome.FAILED:
                out[root] = why
        return out

    def timeout_now(self, now_ms: int) -> int | None:
        """The time trees are timed out at (None: not yet; see
        squall/core/reliability/progress.py)."""
        return self.clock.now(now_ms)

    def expire(self, now_ms: int) -> Results:
        at = self.clock.now(now_ms)
        return Results.empty() if at is None else self.ledger.expire(at)

    def take_orphans(self) -> int:
        """Orphans expired since the last call (for a counter)."""
        n = self.ledger.orphans_expired - self._orphans_reported
        self._orphans_reported = self.ledger.orphans_expired
        return n
