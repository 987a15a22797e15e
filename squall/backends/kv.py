"""A stateful bolt task's keyed state (Storm's ``KeyValueState``) in the state database.

Three tables (:func:`squall.backends.sql.schema`)::

    squall_kv       (state, task, key, value)     one row per key, as of the last compaction:
                                                  pickles, as Storm's KeyValueState
                                                  serializes its keys and values
    squall_kv_log   (state, task, turn, changes)  each turn's changes since then, one row
    squall_kv_turns (state, task, turn)           how many micro-batches changed the state
                                                  (task -1: how many tasks keep it)

A worker that runs the task holds the task's lock (tasks of a fused chain run in several
Spark tasks at once), keeps the state in memory and checks the task's turn before each
micro-batch: unchanged (the usual case: one small read), its copy is current; moved by a
few turns (another worker ran the task: a fused chain's heads take turns on it every
micro-batch), it applies those turns' log rows; moved further, or the job restarted, it
reads the task's rows back. After the micro-batch it appends its changes as one row and
advances the turn, in one transaction, only if the turn is still the one it read: a
worker that ran the task without the lock (one that lost its database session, say)
cannot overwrite another's changes; its micro-batch fails and Spark runs it again.

Why a log: a turn changes hundreds of keys of a busy task, and writing them as rows, then
reading them all back in the other worker, costs far more than one log row each way.
Every :data:`COMPACT_EVERY` turns the saving worker folds the log into the rows, so a
reader never applies more than that many.

Keys are pickled with a fixed protocol, so equal keys of one type make equal rows. Keys
that compare equal across types (``1`` and ``1.0``) are one key in a worker's state, as
in any dict, and the compaction writes the row of the first of them it meets.
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

from squall.backends.sql import Dialect
from squall.core.bolt_api.state import DELETED
from squall.core.errors import StateError

#: Fixed, so that a key's bytes do not change with the Python that wrote them.
_KEY_PROTOCOL = 5
#: A turn that is a multiple of this folds the log into the rows.
COMPACT_EVERY = 32
#: The ``squall_kv_turns`` row of a state as a whole: its turn is how many tasks keep it.
LAYOUT_TASK = -1


class KeyValueStore:
    """One task's keyed state rows, log and turn, over one connection."""

    def __init__(self, conn: Any, dialect: Dialect, state: str, task: int) -> None:
        self.conn, self.d, self.state, self.task = conn, dialect, state, task

    def locked(self) -> AbstractContextManager[None]:
        """The task's lock: one worker at a time runs it (:meth:`Dialect.task_lock`)."""
        return self.d.task_lock(self.conn, self.state, self.task)

    def claim_tasks(self, tasks: int) -> None:
        """Record that ``tasks`` tasks keep the state, or refuse if another number did:
        each task keeps its own keys, so a state kept over a resubmission
        (squall/core/control/kept_state.py) or named in two topologies must keep its parallelism."""
        p, s = self.d.p, self.state
        self.d.begin(self.conn)
        try:
            self.conn.execute(f"INSERT INTO squall_kv_turns (state, task, turn) VALUES ({p}, "
                              f"{p}, {p}) ON CONFLICT (state, task) DO NOTHING",
                              (s, LAYOUT_TASK, tasks))
            row = self.conn.execute(f"SELECT turn FROM squall_kv_turns WHERE state = {p} AND "
                                    f"task = {p}", (s, LAYOUT_TASK)).fetchone()
        except BaseException:
            self.d.rollback(self.conn)
            raise
        self.d.commit(self.conn)
        if int(row[0]) != tasks:
            raise StateError(f"state {s!r} is kept by {int(row[0])} tasks, each with its own "
                             f"keys, and cannot be split among {tasks}: keep the bolt's "
                             f"parallelism at {int(row[0])}, or start with a new state")

    def turn(self) -> int:
        """How many micro-batches have changed the task's state (0: none yet)."""
        p = self.d.p
        row = self.conn.execute(f"SELECT turn FROM squall_kv_turns WHERE state = {p} AND "
                                f"task = {p}", (self.state, self.task)).fetchone()
        return 0 if row is None else int(row[0])

    def load(self) -> tuple[int, dict[Any, Any]]:
        """The task's turn and its whole state, as of that turn."""
        p = self.d.p
        while True:  # a writer may commit between the reads: read until the turn agrees
            turn = self.turn()
            rows = self.conn.execute(f"SELECT key, value FROM squall_kv WHERE state = {p} AND "
                                     f"task = {p}", (self.state, self.task)).fetchall()
            log = self._log_after(0, turn)
            if self.turn() == turn:
                break
        try:
            data = {pickle.loads(bytes(k)): pickle.loads(bytes(v)) for k, v in rows}
            for _, changes in log:
                _apply(data, self._changes(changes))
        except StateError:
            raise
        except Exception as e:  # the rows are the task's own, written by its workers
            raise StateError(f"{self._where()}: a stored key or value cannot be read: {e}"
                             ) from None
        return turn, data

    def since(self, turn: int) -> tuple[int, list[dict[Any, Any]]] | None:
        """The task's turn now, and each turn's changes after ``turn`` in order (``DELETED``:
        a key removed); an empty list if it has not moved. None if the log no longer holds
        them all (folded into the rows), or the turn went back: :meth:`load` instead."""
        now = self.turn()
        if now == turn:
            return now, []
        if now < turn:  # the state was reset under this worker: only a read-back is right
            return None
        log = self._log_after(turn, now)
        if [t for t, _ in log] != list(range(turn + 1, now + 1)):
            return None
        return now, [self._changes(c) for _, c in log]

    def save(self, changes: Mapping[Any, Any], turn: int) -> int:
        """Write ``changes`` (``DELETED``: remove the key) made on top of ``turn``; the new
        turn. :class:`StateError` if another worker moved the turn meanwhile."""
        p, s, t = self.d.p, self.state, self.task
        blob = self._pickle(changes)
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
            self.conn.execute(f"INSERT INTO squall_kv_log (state, task, turn, changes) VALUES "
                              f"({p}, {p}, {p}, {p})", (s, t, turn + 1, blob))
            if (turn + 1) % COMPACT_EVERY == 0:
                self._compact(turn + 1)
        except BaseException:
            self.d.rollback(self.conn)
            raise
        self.d.commit(self.conn)
        return turn + 1

    def close(self) -> None:
        self.conn.close()

    # ----- the log -------------------------------------------------------

    def _log_after(self, turn: int, upto: int) -> list[tuple[int, bytes]]:
        p = self.d.p
        rows = self.conn.execute(
            f"SELECT turn, changes FROM squall_kv_log WHERE state = {p} AND task = {p} AND "
            f"turn > {p} AND turn <= {p} ORDER BY turn",
            (self.state, self.task, turn, upto)).fetchall()
        return [(int(t), bytes(c)) for t, c in rows]

    def _compact(self, upto: int) -> None:
        """Fold the log's turns up to ``upto`` into the rows (inside the save's
        transaction)."""
        p, s, t = self.d.p, self.state, self.task
        merged: dict[Any, Any] = {}
        for _, changes in self._log_after(0, upto):
            merged.update(self._changes(changes))
        puts, dels = [], []
        for k, v in merged.items():
            key = _dumps(k, _KEY_PROTOCOL, k)
            if v is DELETED:
                dels.append((s, t, key))
            else:
                puts.append((s, t, key, _dumps(v, pickle.HIGHEST_PROTOCOL, k)))
        if puts:
            self.conn.cursor().executemany(
                f"INSERT INTO squall_kv (state, task, key, value) VALUES ({p}, {p}, {p}, "
                f"{p}) ON CONFLICT (state, task, key) DO UPDATE SET value = excluded.value",
                puts)
        if dels:
            self.conn.cursor().executemany(
                f"DELETE FROM squall_kv WHERE state = {p} AND task = {p} AND key = {p}", dels)
        self.conn.execute(f"DELETE FROM squall_kv_log WHERE state = {p} AND task = {p} AND "
                          f"turn <= {p}", (s, t, upto))

    def _pickle(self, changes: Mapping[Any, Any]) -> bytes:
        puts = [(k, v) for k, v in changes.items() if v is not DELETED]
        dels = [k for k, v in changes.items() if v is DELETED]
        try:
            return pickle.dumps((puts, dels), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # name the key: pickle says only what it could not pickle
            for k, v in puts:
                _dumps(k, _KEY_PROTOCOL, k)
                _dumps(v, pickle.HIGHEST_PROTOCOL, k)
            for k in dels:
                _dumps(k, _KEY_PROTOCOL, k)
            raise StateError(f"{self._where()}: its changes cannot be saved: {e}") from None

    def _changes(self, blob: bytes) -> dict[Any, Any]:
        try:
            puts, dels = pickle.loads(blob)
            out = dict.fromkeys(dels, DELETED)
            out.update(puts)
        except Exception as e:  # the log is the task's own, written by its workers
            raise StateError(f"{self._where()}: a stored turn's changes cannot be read: {e}"
                             ) from None
        return out

    def _where(self) -> str:
        return f"state {self.state!r} task {self.task}"


def _apply(data: dict[Any, Any], changes: Mapping[Any, Any]) -> None:
    for k, v in changes.items():
        if v is DELETED:
            data.pop(k, None)
        else:
            data[k] = v


def _dumps(x: Any, protocol: int, key: Any) -> bytes:
    try:
        return pickle.dumps(x, protocol=protocol)
    except Exception as e:
        raise StateError(f"state key {key!r} or its value cannot be saved: {e}") from None
