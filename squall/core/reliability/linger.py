"""When a micro-batch that follows an idle spell starts: once its burst has landed.

A bolt query's source offers Spark each micro-batch's end (``latestOffset``). Offering
whatever the edges hold the moment a trigger fires starts a batch with the front of a
burst, and the rest waits for that batch to finish and a second one to run, which costs a
burst a whole micro-batch more. So, as Kafka's producer lingers to fill a batch, an
offer made after an idle spell (the last offer was empty) waits until the edges' ends
stood still for ``quiet_ms``, at most ``linger_ms`` from the first look, or until the
waiting records fill the batch's budget. An offer that follows a batch is made at once:
under load the records that came during the last batch are a batch already, and waiting
would only add latency.

Pure: the caller looks at the edges and passes the time in (milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Linger:
    quiet_ms: int = 20
    linger_ms: int = 100
    #: the last offer was empty (or none was made yet): the next one lingers
    idle: bool = field(default=True, init=False)
    _first: int | None = field(default=None, init=False, repr=False)
    _moved: int = field(default=0, init=False, repr=False)
    _ends: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def ready(self, now_ms: int, start: Mapping[str, int], ends: Mapping[str, int],
              budget: int | None) -> bool:
        """Whether to offer a batch from ``start`` to ``ends`` now (False: look again)."""
        if not self.idle or self.linger_ms <= 0:
            return True
        waiting = sum(max(0, ends.get(k, v) - v) for k, v in start.items())
        if waiting == 0 or (budget is not None and waiting >= budget):
            return True
        if self._first is None or dict(ends) != self._ends:
            self._first = now_ms if self._first is None else self._first
            self._moved, self._ends = now_ms, dict(ends)
        return (now_ms - self._moved >= self.quiet_ms
                or now_ms - self._first >= self.linger_ms)

    def offered(self, start: Mapping[str, int], end: Mapping[str, int]) -> None:
        """The offer made: an empty one makes the next linger, any other not."""
        self.idle = all(end.get(k, v) <= v for k, v in start.items())
        self._first, self._ends = None, {}
