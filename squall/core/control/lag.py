"""A spout's lag per source partition, as Kafka sees it: the log's end less the spout's
committed offset (its consumer group's), in messages and in seconds.

Read from Kafka, not from the spout, so a spout that is down still shows its lag growing.
The lag in seconds is the age of the oldest message not yet committed (the one at the
committed offset, by its Kafka timestamp): how far behind the topology's output is.
Pure: the reading and the time are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PartitionLag:
    component: str
    topic: str
    partition: int
    committed: int
    #: the log's end (the next offset to be written)
    end: int
    #: the Kafka timestamp of the message at ``committed``, if one was read (ms)
    oldest_ms: int | None = None

    @property
    def messages(self) -> int:
        return max(0, self.end - self.committed)

    def seconds(self, now_ms: int) -> float:
        """0 when nothing waits; the oldest waiting message's age otherwise (0 if its time
        is unknown or ahead of this clock)."""
        if self.messages == 0 or self.oldest_ms is None:
            return 0.0
        return max(0.0, (now_ms - self.oldest_ms) / 1000.0)


def storm_lag(spouts: Iterable[str], lags: Iterable[PartitionLag], now_ms: int
              ) -> dict[str, Any]:
    """``GET /api/v1/topology/:id/lag`` in Storm's shape (its ``TopologySpoutLag``): per
    spout, per topic and partition, the committed offset, the log's head and the lag between
    them; Squall adds the lag in seconds."""
    by_spout: dict[str, dict[str, dict[str, dict[str, Any]]]] = {s: {} for s in spouts}
    for lag in sorted(lags, key=lambda x: (x.component, x.topic, x.partition)):
        if lag.component in by_spout:
            by_spout[lag.component].setdefault(lag.topic, {})[str(lag.partition)] = {
                "consumerCommittedOffset": lag.committed, "logHeadOffset": lag.end,
                "lag": lag.messages, "lagSeconds": round(lag.seconds(now_ms), 3)}
    return {s: {"spoutId": s, "spoutType": "KAFKA", "spoutLagResult": result}
            for s, result in by_spout.items()}
