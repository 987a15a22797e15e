"""The wall clock, for services and the shell (the core takes time as an input)."""

from __future__ import annotations

import time


class SystemClock:
    """Milliseconds since the Unix epoch, from the system
    (``squall.core.reliability.clock.Clock``)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
