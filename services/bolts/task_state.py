"""A stateful bolt task's state in the state database: what makes it follow the task
between Python workers, across restarts, and to any machine of a Spark cluster.

Around each micro-batch the worker running the task takes the task's lock (the tasks of
a fused chain run in several Spark tasks at once; a worker holds one lock at a time, so
no two wait on each other), checks the task's turn in the database
(:mod:`squall.backends.kv`) and applies the turns other workers ran since (or reads the
state back); runs the task; writes the keys it changed; and lets the lock go, before its
tuples and acks are flushed (the other heads' turns wait for the task, not for the whole
chain). The semantics are at-least-once, like the tuples: a micro-batch that Spark runs
again after a crash between the write and its commit (its flush included) applies its
changes twice; a task that raises writes nothing, and its worker reads the state back.
For exact state, use a persistent aggregate (Trident state).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from squall.backends.kv import KeyValueStore
from squall.core.bolt_api.state import KeyValueState


class TaskState:
    """One worker's copy of one task's state, and the turn it is current as of."""

    def __init__(self, store: KeyValueStore, state: KeyValueState) -> None:
        self.store = store
        self.state = state
        self._turn: int | None = None

    @contextlib.contextmanager
    def turn(self) -> Iterator[KeyValueState]:
        """Catch up, run the body, write its changes (only if the body succeeds: a failed
        micro-batch is run again, and makes its changes again then)."""
        with self.store.locked():
            self.catch_up()
            try:
                yield self.state
            except BaseException:
                self.state.changes()  # dropped; the next turn reads the state back
                self._turn = None
                raise
            self.save()

    def catch_up(self) -> bool:
        """Bring the state up to date if another worker changed it since (its turns'
        changes, or the whole state read back); whether it did."""
        if self._turn is not None:
            got = self.store.since(self._turn)
            if got is not None:
                self._turn, turns = got
                for changes in turns:
                    self.state.apply(changes)
                return bool(turns)
        self._turn, data = self.store.load()
        self.state.apply(data, replace=True)
        return True

    def save(self) -> None:
        changes = self.state.changes()
        if not changes:
            return
        assert self._turn is not None, "save() outside a turn"
        try:
            self._turn = self.store.save(changes, self._turn)
        except BaseException:
            self._turn = None
            raise
