"""A resubmission that keeps an earlier submission's state (``squall submit --keep-state``).

A new submission starts clean: its topics, groups, checkpoints and state are named by its
own id. Kept, it names its state by the earlier id instead (``TopologySpec.state_of``, the
first of a line of kept submissions) and its spouts start where the earlier ones'
commits got to, recorded by the earlier one's teardown: state without its sources'
position would count what it already holds again.

What must match, component by component, for the state to stay exact:

- each stateful component (``persistent_aggregate``, ``partition_persist``) whose state is
  named by the id is still there, as the same kind of component, with the same state kind
  (the stored values' shape), the same key fields and aggregator or updater;
- and the same parallelism: a task's applied records and txids are its own, so a key that
  moved to another task could be counted twice (Kafka Streams ties its state to its
  partitions for the same reason).

Stateful bolts (``stateful = True``) are known only to the workers that import them: their
keyed state is checked where it is opened (:mod:`squall.backends.kv`). A state named in
the spec (``state: {name: ...}``) belongs to its name and is not the id's to keep.

Pure: the specs and the recorded offsets are passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from squall.core.control.teardown import SourceOffsets, Teardown
from squall.core.errors import NotFoundError, StateConflict
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.trident import STATEFUL, AggregateSpec, PersistSpec, trident_spec


@dataclass(frozen=True)
class StatefulComponent:
    """What a stateful component's stored state depends on."""

    cls: str
    kind: str
    key: tuple[str, ...]
    how: str  # the aggregator or updater
    parallelism: int


def stateful_components(spec: TopologySpec) -> dict[str, StatefulComponent]:
    """The components whose state is named by the topology's state id."""
    return {b.name: c for b in spec.bolts if (c := _stateful(b)) is not None}


def _stateful(b: BoltSpec) -> StatefulComponent | None:
    if b.cls not in STATEFUL:
        return None
    t = trident_spec(b.cls, b.config, f"bolt {b.name!r}")
    assert isinstance(t, (AggregateSpec, PersistSpec))
    if t.state.name is not None:
        return None
    how = t.aggregator if isinstance(t, AggregateSpec) else t.updater
    return StatefulComponent(b.cls, t.state.kind.value, t.group_by, how, b.parallelism)


def incompatibilities(old: TopologySpec, new: TopologySpec) -> list[str]:
    """Why ``new`` cannot keep ``old``'s state, one line per component; [] if it can."""
    was, now = stateful_components(old), {b.name: b for b in new.bolts}
    problems = []
    for name, w in sorted(was.items()):
        where = f"component {name!r}"
        n = now.get(name)
        if n is None:
            problems.append(f"{where} keeps state in {old.state_id} and is not in the new "
                            "topology")
            continue
        got = _stateful(n)
        if got is None:
            problems.append(f"{where} keeps state in {old.state_id} but is now not a "
                            "persistent_aggregate or partition_persist with a state named "
                            "by the topology")
            continue
        for what, a, b in (("kind of component", w.cls, got.cls),
                           ("state kind", w.kind, got.kind),
                           ("key fields", list(w.key), list(got.key)),
                           ("aggregator or updater", w.how, got.how),
                           ("parallelism", w.parallelism, got.parallelism)):
            if a != b:
                problems.append(f"{where}: its {what} was {a!r}, now {b!r}")
    return problems


def check_compatible(old: TopologySpec, new: TopologySpec) -> None:
    """:class:`StateConflict` naming every component whose state ``new`` cannot keep."""
    problems = incompatibilities(old, new)
    if problems:
        raise StateConflict(
            f"topology {new.name!r} cannot keep the state of {old.name}: "
            + "; ".join(problems) + " (keep those as they were, or submit without "
            "--keep-state to start clean)")


def carried_offsets(recorded: SourceOffsets, new: TopologySpec
                    ) -> dict[str, list[tuple[str, int, int]]]:
    """Where each spout of ``new`` starts: the offsets its namesake had committed, for the
    topics it still reads, as ``(topic, partition, offset)``. A new spout, or a new topic
    of one, starts as its ``start`` says."""
    out: dict[str, list[tuple[str, int, int]]] = {}
    for s in new.spouts:
        had = recorded.get(s.name, {})
        at = [(t, p, o) for t in s.topics for p, o in sorted(had.get(t, {}).items())]
        if at:
            out[s.name] = at
    return out


def kept_teardown(ref: str, teardowns: Iterable[Teardown], in_use: Mapping[str, str]
                  ) -> Teardown:
    """The teardown whose state a resubmission keeps: ``ref`` is a killed id, or a name
    (its newest killed submission). ``in_use``: state id -> the live topology using it.
    It must be done (its spouts' offsets are read at the end), its state not purged, and
    the newest of its state (an older one's offsets are behind the state)."""
    all_ = sorted(teardowns, key=lambda t: t.since_ms)
    named = [t for t in all_ if t.id == ref] or [t for t in all_ if t.name == ref]
    if not named:
        raise NotFoundError(f"no killed topology {ref!r} to keep the state of (GET "
                            "/teardowns lists them)")
    t = named[-1]
    if t.done_ms is None:
        raise StateConflict(f"{t.id} is still being torn down (its processes are stopping); "
                            f"keep its state once that is done (squall kill --follow)")
    if t.purge_state:
        raise StateConflict(f"the state of {t.id} was purged when it was killed")
    if t.spec is None:
        raise StateConflict(f"the teardown of {t.id} did not record its topology; its state "
                            "cannot be checked, so it cannot be kept")
    if t.state_id in in_use:
        raise StateConflict(f"the state of {t.id} ({t.state_id}) is in use by the live "
                            f"topology {in_use[t.state_id]}")
    newest = [u for u in all_ if u.state_id == t.state_id and not u.purge_state][-1]
    if newest is not t:
        raise StateConflict(f"{t.id}'s state ({t.state_id}) was kept and changed by {newest.id} "
                            f"since; keep {newest.id}'s instead")
    return t
