"""Time as an input: the reliability core never reads the wall clock itself.

The real clock is the shell's (``squall.wallclock.SystemClock``)."""

from __future__ import annotations

from typing import Protocol

from squall.core.errors import UsageError


class Clock(Protocol):
    """Milliseconds since the Unix epoch, as Kafka record timestamps are."""

    def now_ms(self) -> int: ...


class ManualClock:
    """A clock that tests move by hand."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise UsageError(f"a clock only moves forward, got advance({ms})")
        self._now += ms

    def set(self, now_ms: int) -> None:
        self._now = now_ms
