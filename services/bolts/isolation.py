"""A bolt task's micro-batch run in parts, each in a process of its own, to find the records
that kill or hang the process running them (docs/poison.md).

A task runs this way on an attempt at its micro-batch after one that died: its Python worker
crashed (a segfault, ``os._exit``, the kernel's out-of-memory killer), was killed for running
a call past the bolt deadline (services/bolts/guardian.py), or the whole job died with it;
and when its micro-batch holds a suspect (services/bolts/suspects.py).
The parts are chosen by :class:`~squall.core.reliability.culprits.CulpritSearch`; each runs
in a child (services/bolts/sandbox.py) that builds the bolt afresh and, for a stateful bolt,
starts from the task's state as the parts before it left it. The worker keeps what each
completed part returned, applies its state changes, and fails the roots of each culprit with
what killed it; the caller produces the merged result as it would the task's own. So every
other record is executed once, and a culprit's tree is replayed by the spout (then
dead-lettered, with that reason, when its retries run out).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from services.bolts.sandbox import Completed, Died, Sandbox
from services.bolts.suspects import Suspects
from squall.core.bolt_api.state import DELETED, KeyValueState
from squall.core.errors import BoltFault
from squall.core.reliability.culprits import CulpritSearch, Part, units_of
from squall.core.reliability.records import AckerBatch
from squall.core.tasks.exec_result import CallWatch, ExecResult, merged
from squall.core.tasks.executor import BoltExecutor
from squall.core.wire.tuple_batch import TupleBatch

log = logging.getLogger("squall.bolts")

#: The parts a stateless bolt's micro-batch is split into, and how many run at once: the
#: culprits of a part are found one after another (each may cost a deadline), those of
#: different parts at the same time; a part that hangs only waits.
PARALLEL, AT_ONCE = 8, 32


def run_isolated(ex: BoltExecutor, fresh: Callable[[], BoltExecutor],
                 batches: Sequence[TupleBatch], deadline_s: float, now_ms: Callable[[], int],
                 suspects: Suspects | None = None, hung: tuple[int, float] | None = None
                 ) -> ExecResult:
    """``ex``'s run of ``batches``, in parts in children each running ``fresh()`` (a new
    executor of the same task); ``ex.state``, if any, ends as the completed parts left it.
    ``suspects``: the query's recent culprits, each run alone first; the new ones are added.
    ``hung``: the input (its index) whose call the guardian saw outrun the deadline (given)
    on the last attempt: a culprit at once, not run again."""
    batches = [b for b in batches if len(b)]
    first_roots = np.concatenate([np.empty(0, np.uint64)] + [b.first_roots() for b in batches])
    unit_of, _ = units_of(first_roots.tolist())
    units = np.asarray(unit_of, np.int64)
    ctx = ex.context
    what = f"bolt {ctx.component!r} task {ctx.task}"
    alone = np.unique(units[suspects.rows(batches)]).tolist() if suspects else []
    stateless = ex.state is None
    search = CulpritSearch(int(units.max()) + 1 if units.size else 0,
                           PARALLEL if stateless else 1, alone, AT_ONCE if stateless else 1)
    if hung is not None and 0 <= hung[0] < units.size:
        search.convicted(int(units[hung[0]]), f"did not return within {hung[1]:g} s")
    sandbox = Sandbox(deadline_s, what)
    parts: dict[int, Part] = {}
    results: list[ExecResult] = []
    try:
        while not search.done:
            for part in search.start():
                rows = np.flatnonzero(np.isin(units, part.units))
                sub = _rows(batches, rows)
                parts[part.id] = part
                sandbox.start(part.id, _work(fresh, sub, ex.state), units[rows].tolist())
            for key, outcome in sandbox.wait():
                part = parts.pop(key)
                if isinstance(outcome, Completed):
                    res, changes = outcome.value
                    results.append(res)
                    if changes and ex.state is not None:
                        _apply(ex, changes)
                    search.completed_part(part)
                elif isinstance(outcome, Died):
                    search.died(part, outcome.unit, outcome.reason)
                    log.warning("%s: a part of %d records %s; %s", what, len(part.units),
                                outcome.reason, "its record is failed" if outcome.unit
                                is not None or len(part.units) == 1 else "split further")
                else:
                    raise BoltFault(outcome.reason)
    finally:
        sandbox.close()
    found = _culprits(search.culprits, units, batches, what, now_ms())
    found.culprits, found.sandboxes = len(search.culprits), search.runs
    results.append(found)
    if suspects is not None and search.culprits:
        suspects.add(_origins(batches, units, search.culprits))
    log.warning("%s: micro-batch run in %d parts (%d under suspicion); %d records failed as "
                "culprits", what, search.runs, len(alone), len(search.culprits))
    return merged(results)


def _work(fresh: Callable[[], BoltExecutor], batches: list[TupleBatch],
          state: KeyValueState | None
          ) -> Callable[[CallWatch], tuple[ExecResult, dict[Any, Any] | None]]:
    """A part's run, in the child: ``state``, the task's as the child inherited it."""
    def work(watch: CallWatch) -> tuple[ExecResult, dict[Any, Any] | None]:
        ex = fresh()  # the bolt built here: the worker's clients are not the child's to use
        if state is not None and ex.state is not None:
            ex.state.apply(state.snapshot(), replace=True)
        res = ex.run(batches, watch)
        return res, ex.state.changes() if ex.state is not None else None

    return work


def _apply(ex: BoltExecutor, changes: dict[Any, Any]) -> None:
    """A part's state changes into the task's state, marked changed (the task saves them)."""
    assert ex.state is not None
    for k, v in changes.items():
        if v is DELETED:
            ex.state.delete(k)
        else:
            ex.state.put(k, v)


def _rows(batches: Sequence[TupleBatch], rows: np.ndarray) -> list[TupleBatch]:
    """The tuples at ``rows`` (indices over the batches' rows in turn), batch by batch."""
    out, at = [], 0
    for b in batches:
        mine = rows[(rows >= at) & (rows < at + len(b))] - at
        if mine.size:
            out.append(TupleBatch(b.data.take(pa.array(mine)), b.stream, b.source,
                                  b.source_task))
        at += len(b)
    return out


def _culprits(culprits: dict[int, str], units: np.ndarray, batches: Sequence[TupleBatch],
              what: str, now_ms: int) -> ExecResult:
    """Each culprit's tuples failed (every root they belong to), with why."""
    res = ExecResult()
    if not culprits:
        return res
    roots = []
    for unit, reason in sorted(culprits.items()):
        sub = _rows(batches, np.flatnonzero(units == unit))
        mine = [b.all_roots() for b in sub]
        roots += mine
        res.failed += sum(len(b) for b in sub)
        res.executed += sum(len(b) for b in sub)  # called, as a tuple that raised is
        res.errors.append(f"{reason} (in {what}, on {_describe(sub)})")
        res.reasons.update((int(r), f"{reason} (in {what})")
                           for r in np.concatenate(mine).tolist())
    res.acks = AckerBatch.fails(np.unique(np.concatenate(roots)), now_ms)
    return res


def _origins(batches: Sequence[TupleBatch], units: np.ndarray, culprits: Iterable[int]
             ) -> list[tuple[str, int]]:
    """The source messages the culprits' tuples descend from (where the tuples say)."""
    out: set[tuple[str, int]] = set()
    for unit in culprits:
        for b in _rows(batches, np.flatnonzero(units == unit)):
            out.update(t.origin for t in b.tuples() if t.origin is not None)
    return sorted(out)


def _describe(sub: Sequence[TupleBatch]) -> str:
    """A culprit as a reader can find it: its source message, else its first values."""
    t = sub[0].tuples()[0] if sub and len(sub[0]) else None
    if t is None:
        return "no input"
    if t.origin is not None:
        return f"the input from {t.origin[0]}@{t.origin[1]}"
    return f"input {str(tuple(t.values))[:120]}"
