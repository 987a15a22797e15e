"""What the spout service observes, as events: the interface its metrics implement.

The service says what happened (messages emitted, trees settled, offsets committed, a dead
letter sent); a listener decides what to make of it.
:class:`services.spout.metrics.SpoutMetrics` makes Prometheus series of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np
import numpy.typing as npt


class SpoutListener(Protocol):
    def emitted(self, task: int, emitted: int, replayed: int, recovered: int,
                undecodable: int, pending: int) -> None:
        """Source messages emitted as tuple trees (``replayed`` of them again), offsets
        found done before a restart (``recovered``, not emitted), messages the scheme
        could not decode, and the task's pending trees after it."""

    def settled(self, acked: int, latencies_ms: npt.NDArray[np.int64], failed: Mapping[str, int],
                stale: int) -> None:
        """Trees completed (with their complete latencies), failed per reason (failed,
        timeout, backstop), and results for roots no longer pending."""

    def bad_results(self, task: int, where: str, reason: str, now_ms: int) -> None:
        """A results batch that could not be read."""

    def dead_lettering(self, task: int, where: str, reason: str, now_ms: int) -> None:
        """A source message on its way to the dead-letter topic."""

    def dead_lettered(self) -> None:
        """A dead letter Kafka confirmed."""

    def unpaused(self, task: int, seconds: float) -> None:
        """A partition of ``task`` resumed after ``seconds`` paused by backpressure."""

    def committed(self, topic: str, partition: int, offset: int, lag: int | None) -> None:
        """A source partition's committed offset (set at every commit, moved or not: a stuck
        partition's lag must grow while its offset stands still), and its lag if known."""
