"""When to restart a task process that exited, and when a restart loop is a crash loop.

One policy for every supervisor (the worker, ``squall run``). Pure: times are
passed in. Rules:
- a process that exits is restarted after a backoff: 1 s, doubling with each
  exit in a row, at most ``max_delay_ms``;
- a process that ran ``healthy_ms`` or longer before exiting was healthy: its
  row of exits starts again (a crash after a day of work restarts at once). Its
  run counts from its start, or from when it said it was ready (a slow start
  is not work: ``squall.supervision.Command.ready``);
- ``crash_loop_after`` exits in a row, each sooner than ``healthy_ms`` after
  its start, make a crash loop: still restarted (the cause may pass: a broker
  back, a disk freed), but reported as such until a run is healthy again.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Restarts:
    base_delay_ms: int = 1_000
    max_delay_ms: int = 30_000
    healthy_ms: int = 60_000
    crash_loop_after: int = 3
    #: exits in a row, each before the process had run ``healthy_ms``
    in_a_row: int = 0
    #: every restart since the supervisor started (for a counter)
    total: int = 0
    _due_ms: int | None = None

    def exited(self, now_ms: int, counted_from_ms: int) -> int:
        """The process exited at ``now_ms`` (its run counted from ``counted_from_ms``): when
        to restart."""
        self.in_a_row = 1 if now_ms - counted_from_ms >= self.healthy_ms else self.in_a_row + 1
        delay = min(self.max_delay_ms, self.base_delay_ms * 2 ** min(self.in_a_row - 1, 20))
        self._due_ms = now_ms + (0 if self.in_a_row == 1 else delay)
        return self._due_ms

    def due(self, now_ms: int) -> bool:
        """A restart is due now (call :meth:`restarted` once it is done)."""
        return self._due_ms is not None and now_ms >= self._due_ms

    def restarted(self) -> None:
        self._due_ms = None
        self.total += 1

    def running(self, now_ms: int, counted_from_ms: int) -> None:
        """The process is alive: once its run counts ``healthy_ms`` it is healthy again."""
        if self.in_a_row and now_ms - counted_from_ms >= self.healthy_ms:
            self.in_a_row = 0

    @property
    def crash_looping(self) -> bool:
        return self.in_a_row >= self.crash_loop_after

    @property
    def waiting(self) -> bool:
        return self._due_ms is not None
