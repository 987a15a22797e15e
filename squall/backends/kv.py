"""A stateful bolt task's keyed state (Storm's ``KeyValueState``) in the state database.

Two tables (:func:`squall.backends.sql.schema`)::

    squall_kv       (state, task, key, value)   one row per key: pickles, as Storm's
                                                KeyValueState serializes its keys and values
    squall_kv_turns (state, task, turn)         how many micro-batches changed the task's state

A worker that runs the task holds the task's lock (tasks of a fused chain run in several
Spark tasks at once), keeps the state in memory and checks the task's turn before each
micro-batch: unchanged (the usual case: one small read), its copy is current; moved
(another worker ran the task, or the job restarted), it reads the task's rows back. After
the micro-batch it writes the changed keys and advances the turn, in one transaction, only
if the turn is still the one it read: a worker that ran the task without the lock (one
that lost its database session, say) cannot overwrite another's changes; its micro-batch
fails and Spark runs it again.

Keys are pickled with a fixed protocol, so equal keys of one type make equal rows; keys
that compare equal across types (``1`` and ``1.0``) are different rows.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from squall.backends.sql import Dialect
from squall.core.errors import StateError
from squall.core.state import DELETED

#: Fixed, so that a key's bytes do not change with the Python that wrote them.
_KEY_PROTOCOL = 5


class KeyValueStore:
    """One task's keyed state rows and turn, over one connection."""

    def __init__(self, conn: Any, dialect: Dialect, state: str, task: int) -> None:
        self.conn, self.d, self.state, self.task = conn, dialect, state, task

    def locked(self) -> AbstractContextManager[None]:
        """The task's lock: one worker at a time runs it (:meth:`Dialect.task_lock`)."""
        return self.d.task_lock(self.conn, self.state, self.task)

    def turn(self) -> int:
        """How many micro-batches have changed the task's state (0: none yet)."""
        p = self.d.p
        row = self.conn.execute(f"SELECT turn FROM squall_kv_turns WHERE state = {p} AND "
                                f"task = {p}", (self.state, self.task)).fetchone()
        return 0 if row is None else int(row[0])

    def load(self) -> tuple[int, dict[Any, Any]]:
        """The task's turn and its whole state, as of that turn."""
        p = self.d.p
        while True:  # a writer may commit between the two reads: read until they agree
            turn = self.turn()
            rows = self.conn.execute(f"SELECT key, value FROM squall_kv WHERE state = {p} AND "
                                     f"task = {p}", (self.state, self.task)).fetchall()
            if self.turn() == turn:
                break
        where = f"state {self.state!r} task {self.task}"
        try:
            return turn, {pickle.loads(bytes(k)): pickle.loads(bytes(v)) for k, v in rows}
        except Exception as e:  # the rows are the task's own, written by its workers
            raise StateError(f"{where}: a stored key or value cannot be read: {e}") from None

    def save(self, changes: Mapping[Any, Any], turn: int) -> int:
        """Write ``changes`` (``DELETED``: remove the key) made on top of ``turn``; the new
        turn. :class:`StateError` if another worker moved the turn meanwhile."""
        p, s, t = self.d.p, self.state, self.task
        puts, dels = [], []
        for k, v in changes.items():
            key = _dumps(k, _KEY_PROTOCOL, k)
            if v is DELETED:
                dels.append((s, t, key))
            else:
                puts.append((s, t, key, _dumps(v, pickle.HIGHEST_PROTOCOL, k)))
        self.d.begin(self.conn)
        try:
            cur = self.conn.execute(f"UPDATE squall_kv_turns SET turn = turn + 1 WHERE state = "
                                    f"{p} AND task = {p} AND turn = {p}", (s, t, turn))
            if cur.rowcount != 1:
                if turn != 0 or self.turn() != 0:
                    raise StateError(f"state {s!r} task {t}: another worker changed it since "
                                     f"turn {turn}; this micro-batch will be run again")
                self.conn.execute(f"INSERT INTO squall_kv_turns (state, task, turn) VALUES "
                                  f"({p}, {p}, 1)", (s, t))
            if puts:
                self.conn.cursor().executemany(
                    f"INSERT INTO squall_kv (state, task, key, value) VALUES ({p}, {p}, {p}, "
                    f"{p}) ON CONFLICT (state, task, key) DO UPDATE SET value = excluded.value",
                    puts)
            if dels:
                self.conn.cursor().executemany(
                    f"DELETE FROM squall_kv WHERE state = {p} AND task = {p} AND key = {p}",
                    dels)
        except BaseException:
            self.d.rollback(self.conn)
            raise
        self.d.commit(self.conn)
        return turn + 1

    def close(self) -> None:
        self.conn.close()


def _dumps(x: Any, protocol: int, key: Any) -> bytes:
    try:
        return pickle.dumps(x, protocol=protocol)
    except Exception as e:
        raise StateError(f"state key {key!r} or its value cannot be saved: {e}") from None
