"""Which records of a micro-batch kill or hang the process that runs them: the search.

A bolt task's micro-batch whose first attempt died (its Python process crashed, was killed,
or was killed for outrunning the bolt deadline) runs again in parts, each part in a process
of its own (services/bolts/sandbox.py). A part is a set of *units*: the input tuples of one
source message's emission (their first root), the smallest thing that can be failed and
replayed alone. Rules:

- at first each unit under suspicion (its source message killed a process before) is a part
  of its own, and the rest are split into ``parallel`` parts (one when the bolt keeps state:
  each part must start from the state the one before left);
- a part that completes is done: its results are kept, and each of its units ran once;
- a part that died in a call on one unit (the per-tuple API names the tuple) makes that
  unit a culprit, with the reason; the rest of the part runs again: the units before it
  (they ran) as one part, the units after it (not tried yet, and as likely as any to hold
  another culprit) in up to ``parallel`` parts, so that culprits of one part are found at
  the same time as well (one part in order, when they run one at a time);
- a part that died in a call on several units (a batch bolt's one call) is split in up to
  ``parallel`` pieces (two at least), each run again; a part of one unit that dies is a
  culprit.

Every death either names a culprit or splits a part, so the search ends; a unit is a
culprit only once a process died or hung in a call on it, or in a call on it alone (here, or
as the guardian saw it on the attempt before: :meth:`CulpritSearch.convicted`). What
killed a process outside any call (a bolt's ``prepare``, the framework) is not a record's
fault: the caller stops the search and says so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from squall.core.errors import UsageError


@dataclass(frozen=True)
class Part:
    """One run of some units, in a process of its own."""

    id: int
    units: tuple[int, ...]


@dataclass
class CulpritSearch:
    """The search over units ``0 .. units - 1``; see the module's rules."""

    units: int
    #: how many parts a set of units is split into
    parallel: int = 1
    #: units under suspicion, each run alone first
    alone: Sequence[int] = ()
    #: parts running at once (default ``parallel``): a part that hangs holds its place for a
    #: deadline while doing nothing, so more may run than the pieces of one split
    at_once: int = 0
    culprits: dict[int, str] = field(default_factory=dict)
    #: parts that completed: every unit not a culprit ends in exactly one
    completed: list[Part] = field(default_factory=list)
    runs: int = 0
    _waiting: deque[tuple[int, ...]] = field(default_factory=deque)
    _running: dict[int, Part] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.parallel < 1:
            raise UsageError(f"parallel must be >= 1, got {self.parallel}")
        self.at_once = self.at_once or self.parallel
        alone = sorted(set(self.alone))
        if alone and not 0 <= alone[0] <= alone[-1] < self.units:
            raise UsageError(f"units under suspicion {alone} are not all in 0..{self.units - 1}")
        self._waiting.extend((u,) for u in alone)
        rest = tuple(u for u in range(self.units) if u not in set(alone))
        self._waiting.extend(_split(rest, self.parallel))

    @property
    def done(self) -> bool:
        return not self._waiting and not self._running

    def start(self) -> list[Part]:
        """The parts to start now (at most ``at_once`` run at once)."""
        out = []
        while self._waiting and len(self._running) < self.at_once:
            part = Part(self.runs, self._waiting.popleft())
            self.runs += 1
            self._running[part.id] = part
            out.append(part)
        return out

    def convicted(self, unit: int, reason: str) -> None:
        """``unit`` is a culprit already (a process died or hung on it, seen elsewhere): it
        runs in no part."""
        if not 0 <= unit < self.units or self._running:
            raise UsageError(f"unit {unit} cannot be convicted now (of {self.units}, "
                             f"{len(self._running)} parts running)")
        self.culprits[unit] = reason
        waiting = [tuple(u for u in p if u != unit) for p in self._waiting]
        self._waiting = deque(p for p in waiting if p)

    def completed_part(self, part: Part) -> None:
        self.completed.append(self._end(part))

    def died(self, part: Part, unit: int | None, reason: str) -> None:
        """``part`` died in a call on ``unit`` (None: on several units at once)."""
        if unit is not None and unit not in part.units:
            raise UsageError(f"unit {unit} is not in part {part.id} {part.units}")
        units = self._end(part).units
        if unit is None and len(units) == 1:
            unit = units[0]
        if unit is not None:
            self.culprits[unit] = reason
            at = units.index(unit)
            before, after = units[:at], units[at + 1:]
            rest = [before, *_split(after, self.parallel)] if self.parallel > 1 else \
                [before + after]
            self._waiting.extendleft(reversed([r for r in rest if r]))
            return
        # Next to run, first piece first: the search narrows before anything else runs.
        self._waiting.extendleft(reversed(_split(units, max(2, self.parallel))))

    def _end(self, part: Part) -> Part:
        got = self._running.pop(part.id, None)
        if got is None:
            raise UsageError(f"part {part.id} is not running")
        return got


def _split(units: tuple[int, ...], n: int) -> list[tuple[int, ...]]:
    """``units`` in up to ``n`` contiguous pieces of near-equal size (none empty)."""
    n = max(1, min(n, len(units)))
    size, extra = divmod(len(units), n)
    out, at = [], 0
    for i in range(n):
        k = size + (1 if i < extra else 0)
        out.append(units[at:at + k])
        at += k
    return [p for p in out if p]


def units_of(first_roots: Sequence[int]) -> tuple[list[int], list[int]]:
    """Each input's unit (its emission: inputs of one first root share one), numbered in
    order of first appearance; and each unit's first input."""
    of: dict[int, int] = {}
    unit: list[int] = []
    first: list[int] = []
    for i, r in enumerate(first_roots):
        u = of.get(r)
        if u is None:
            u = of[r] = len(first)
            first.append(i)
        unit.append(u)
    return unit, first
