"""What the acker service observes, as events: the interface its metrics implement.

The service says what happened (records applied, trees decided, a watermark committed);
a listener decides what to make of it. :class:`services.acker.metrics.AckerMetrics` makes
Prometheus series of it; a test or another monitoring system can listen the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt


class AckerListener(Protocol):
    def consumed(self, messages: int) -> None:
        """Acker-topic messages (record batches) taken from Kafka."""

    def applied(self, kinds: list[int]) -> None:
        """Records applied to a ledger: how many of each kind, indexed by
        :class:`squall.core.reliability.records.RecordKind`."""

    def decided(self, outcomes: Mapping[str, int], resets: int,
                latencies_s: npt.NDArray[np.float64]) -> None:
        """Trees decided per outcome (acked, failed, timed_out), timeout resets forwarded,
        and the decided trees' complete latencies."""

    def timeout_clock(self, task: int, delay_s: float) -> None:
        """How far task ``task``'s timeout clock is behind the wall clock (NaN: no bolts
        job has reported its progress yet)."""

    def bad_record(self, task: int, where: str, reason: str, now_ms: int) -> None:
        """A malformed acker message, skipped and dead-lettered."""

    def undelivered(self) -> None:
        """A result or dead letter that Kafka did not accept."""

    def committed(self, task: int, watermark: int, pending: int, pending_bytes: int,
                  orphans: int, lag: int | None) -> None:
        """Task ``task``'s watermark committed, with its ledger's state then."""
