"""After a restart: which new offsets were already done by the old incarnation (pure).

Offsets acked after the last commit are recognised by their roots: a root is derived from
(salt, source, offset, attempt), so the old incarnations' salts and the roots the ackers
reported acked give them back. Offsets dead-lettered after the last commit are known by
(source, offset). Either kind is done already and is not emitted again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from squall.core.reliability.ids import derive_roots


class RestartRecovery:
    def __init__(self, committed: Sequence[int], old_salts: Sequence[int] = (),
                 acked_roots: set[int] | None = None,
                 lettered: set[tuple[int, int]] | None = None,
                 attempts: int = 1, window: int = 100_000) -> None:
        self._old_salts = list(old_salts)
        self._acked = acked_roots or set()
        self._lettered = {(s, o) for s, o in (lettered or set()) if o >= committed[s]}
        self._attempts = attempts
        # How far past its commit point the old incarnation can have emitted.
        self._below = [c + window for c in committed]

    def done(self, src: int, offsets: list[int], fetched_ends: Sequence[int]) -> set[int]:
        """Which of these new offsets of ``src`` were done before the restart (each is
        reported once). ``fetched_ends``: how far each source has been read."""
        found = self._acked_offsets(src, offsets, fetched_ends)
        if self._lettered:
            found |= {o for o in offsets if (src, o) in self._lettered}
            self._lettered -= {(src, o) for o in found}
        return found

    def _acked_offsets(self, src: int, offsets: list[int], fetched_ends: Sequence[int]
                       ) -> set[int]:
        if not self._acked:
            return set()
        offs = np.fromiter((o for o in offsets if o < self._below[src]), np.int64)
        if offs.size < len(offsets) and all(
                end >= lim for end, lim in zip(fetched_ends, self._below, strict=True)):
            self._acked.clear()  # past every window the old incarnation could reach
        found: set[int] = set()
        for salt in self._old_salts:
            for attempt in range(self._attempts):
                roots = derive_roots(salt, src, offs, np.full(offs.size, attempt, np.int64))
                for o, root in zip(offs.tolist(), roots.tolist(), strict=True):
                    if root in self._acked:
                        self._acked.discard(root)
                        found.add(o)
        return found
