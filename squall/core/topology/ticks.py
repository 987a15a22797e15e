"""Tick tuples (Storm's ``topology.tick.tuple.freq.secs``): a bolt that asks for them gets
one tuple on stream ``__tick`` from component ``__system`` every so many seconds, per task.

Ticks are not tracked: a tick has no root, is acked by nobody, and a tuple emitted anchored
to one alone is untracked (as in Storm). They come through Kafka, so that a micro-batch runs
when they are due even if no data comes: through the first input topic of the bolt's chain
head (squall/core/topology/chains.py), after the data already there. A bolt fused behind
the head gets its tick from a head task (:func:`tick_routes`), after that task's emits to
it. :class:`TickSchedule` says when each is due; the bolts driver sends them
(services/bolts/ticks.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.core.errors import TopologyError

#: The bolt configuration key, Storm's name.
TICK_FREQ = "topology.tick.tuple.freq.secs"
#: Fewest seconds between ticks: the driver looks every half second.
MIN_FREQ_S = 1.0
MAX_FREQ_S = 86_400.0


def tick_freq(config: Mapping[str, Any], where: str) -> float | None:
    """A bolt's tick interval in seconds from its configuration (None: no ticks), or a
    TopologyError naming the value."""
    if TICK_FREQ not in config:
        return None
    v = config[TICK_FREQ]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or \
            not MIN_FREQ_S <= v <= MAX_FREQ_S:
        raise TopologyError(f"{where}: {TICK_FREQ} must be a number of seconds in "
                            f"[{MIN_FREQ_S:g}, {MAX_FREQ_S:g}], got {v!r}")
    return float(v)


@dataclass
class TickSchedule:
    """When each ticked bolt's next tick is due (time passed in, milliseconds)."""

    freq_s: Mapping[str, float]
    _next: dict[str, int] = field(default_factory=dict)

    def due(self, now_ms: int) -> list[str]:
        """The bolts whose tick is due now; their next is one interval on (a driver that
        was held up sends one tick, not the ones it missed, as Storm's timer does)."""
        out = []
        for bolt, freq in sorted(self.freq_s.items()):
            every = round(freq * 1000)
            at = self._next.setdefault(bolt, now_ms + every)
            if now_ms >= at:
                out.append(bolt)
                self._next[bolt] = at + every if at + every > now_ms else now_ms + every
        return out


def tick_routes(head_tasks: int, bolt_tasks: int) -> dict[int, list[int]]:
    """Which of a bolt's tasks each task of its chain's head hands its ticks to (a head's
    own: each to itself): every task of the bolt gets each tick once. Head tasks with no
    share are left out: they are sent no tick."""
    if head_tasks < 1 or bolt_tasks < 1:
        raise TopologyError(f"tick routes need tasks on both sides, got {head_tasks} head "
                            f"tasks and {bolt_tasks} bolt tasks")
    routes: dict[int, list[int]] = {}
    for task in range(bolt_tasks):
        routes.setdefault(task % head_tasks, []).append(task)
    return routes
