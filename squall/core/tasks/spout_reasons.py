"""Why roots failed, as the ackers passed it on: kept until the failed results they
explain are read (pure).

An acker sends a batch's fail reasons just before the results they explain, on the same
partition; the spout keeps them until it reads those results, and at most
:data:`MAX_REASONS` (the oldest go first: their results were lost or are long past).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

#: Fail reasons kept for results not read yet.
MAX_REASONS = 10_000


class FailReasons(dict[int, str]):
    """Root -> why its tree failed."""

    def add(self, reasons: Mapping[int, str]) -> None:
        self.update(reasons)

    def read(self, failed: Iterable[int]) -> None:
        """Results for ``failed`` roots were read: their reasons are no longer needed."""
        for r in failed:
            self.pop(r, None)
        for old in list(self)[:max(0, len(self) - MAX_REASONS)]:
            del self[old]
