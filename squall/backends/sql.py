"""A state's store in a SQL database: the backing map and the applied records of one task.

Two tables, shared by every state of a database::

    squall_state   (state, key, value)          one row per key: JSON (squall.core.trident.codec)
    squall_applied (state, task, txid, record)  one row per batch of a task still uncommitted
                                                at the spout (squall.core.trident.applied)
    squall_tasks   (state, task, mark)          each task's last txid and floors (TaskMark)

and two for stateful bolts' keyed state (squall.backends.kv).

A batch's writes go in one transaction (``begin_commit`` .. ``commit``). The SQL is the
same for SQLite and PostgreSQL but for placeholders and the key lookup, which a
:class:`Dialect` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from squall.core.errors import StateError
from squall.core.trident.applied import BatchRecord, TaskMark
from squall.core.trident.codec import (
    MapKind,
    decode_key,
    decode_value,
    decode_values,
    encode_key,
    encode_keys,
    encode_values,
)
from squall.core.trident.state import Key


def schema(table_suffix: str = "", blob: str = "BLOB") -> tuple[str, ...]:
    """The tables; ``table_suffix`` is appended to each CREATE TABLE (SQLite: WITHOUT
    ROWID, so a row lives in its primary key's B-tree, written once); ``blob``: the
    database's byte string type. ``squall_kv`` and ``squall_kv_turns`` hold stateful bolts'
    keyed state (:mod:`squall.backends.kv`)."""
    return (
        "CREATE TABLE IF NOT EXISTS squall_state (state TEXT NOT NULL, key TEXT NOT NULL, "
        f"value TEXT NOT NULL, PRIMARY KEY (state, key)){table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_applied (state TEXT NOT NULL, task INTEGER NOT "
        "NULL, txid BIGINT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (state, task, txid))"
        f"{table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_tasks (state TEXT NOT NULL, task INTEGER NOT NULL, "
        f"mark TEXT NOT NULL, PRIMARY KEY (state, task)){table_suffix}",
        f"CREATE TABLE IF NOT EXISTS squall_kv (state TEXT NOT NULL, task INTEGER NOT NULL, "
        f"key {blob} NOT NULL, value {blob} NOT NULL, PRIMARY KEY (state, task, key))"
        f"{table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_kv_turns (state TEXT NOT NULL, task INTEGER NOT "
        f"NULL, turn BIGINT NOT NULL, PRIMARY KEY (state, task)){table_suffix}",
    )


class Dialect(Protocol):
    """What differs between the databases."""

    name: str
    #: the DB-API placeholder
    p: str

    def begin(self, conn: Any) -> None: ...

    def commit(self, conn: Any) -> None: ...

    def rollback(self, conn: Any) -> None: ...

    def select_keys(self, conn: Any, state: str, keys: list[str]) -> list[tuple[str, str]]: ...

    def task_lock(self, conn: Any, state: str, task: int) -> AbstractContextManager[None]:
        """Held while one worker runs a state's task: others that run it at the same time
        (a fused chain's tasks, a zombie) wait."""
        ...


@dataclass(frozen=True)
class StoreName:
    """Which state and which of its tasks a store serves."""

    state: str
    task: int
    kind: MapKind


class SqlStore:
    """Trident's ``IBackingMap`` plus the task's applied records, over one connection."""

    def __init__(self, conn: Any, dialect: Dialect, name: StoreName) -> None:
        self.conn = conn
        self.d = dialect
        self.name = name
        self._open: int | None = None
        # The keys of the last multi_get, encoded: a batch puts the keys it just read.
        self._texts: dict[Key, str] = {}

    # ----- BackingMap ----------------------------------------------------

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        if not keys:
            return []
        texts = encode_keys(keys)
        self._texts = dict(zip(keys, texts, strict=True))
        found = dict(self.d.select_keys(self.conn, self.name.state, texts))
        return decode_values(self.name.kind, [found.get(t) for t in texts])

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        if not keys:
            return
        p, s, texts = self.d.p, self.name.state, self._texts
        values = encode_values(self.name.kind, vals)
        # In key order: neighbouring rows of the primary key's B-tree are written together.
        rows = sorted((s, texts.get(k) or encode_key(k), v)
                      for k, v in zip(keys, values, strict=True))
        self._write(f"INSERT INTO squall_state (state, key, value) VALUES ({p}, {p}, {p}) "
                    "ON CONFLICT (state, key) DO UPDATE SET value = excluded.value", rows)

    def items(self) -> list[tuple[Key, Any]]:
        """Every key of the state with its stored value (for inspection and checks)."""
        p = self.d.p
        cur = self.conn.cursor()
        cur.execute(f"SELECT key, value FROM squall_state WHERE state = {p}", (self.name.state,))
        return [(decode_key(k), decode_value(self.name.kind, v)) for k, v in cur.fetchall()]

    # ----- applied records -----------------------------------------------

    def load_applied(self) -> list[BatchRecord]:
        p = self.d.p
        cur = self.conn.cursor()
        cur.execute(f"SELECT record FROM squall_applied WHERE state = {p} AND task = {p} "
                    "ORDER BY txid", (self.name.state, self.name.task))
        return [BatchRecord.decode(r[0].encode()) for r in cur.fetchall()]

    def put_applied(self, rec: BatchRecord) -> None:
        p = self.d.p
        self._write(f"INSERT INTO squall_applied (state, task, txid, record) VALUES "
                    f"({p}, {p}, {p}, {p}) ON CONFLICT (state, task, txid) DO UPDATE SET "
                    "record = excluded.record",
                    [(self.name.state, self.name.task, rec.txid, rec.encode().decode())])

    def load_task(self) -> TaskMark:
        p = self.d.p
        row = self.conn.execute(f"SELECT mark FROM squall_tasks WHERE state = {p} AND "
                                f"task = {p}", (self.name.state, self.name.task)).fetchone()
        return TaskMark() if row is None else TaskMark.decode(row[0].encode())

    def put_task(self, mark: TaskMark) -> None:
        p = self.d.p
        self._write(f"INSERT INTO squall_tasks (state, task, mark) VALUES ({p}, {p}, {p}) "
                    "ON CONFLICT (state, task) DO UPDATE SET mark = excluded.mark",
                    [(self.name.state, self.name.task, mark.encode().decode())])

    def locked(self) -> AbstractContextManager[None]:
        """The task's lock: its batches run one at a time (a fused aggregate's task runs in
        every upstream task's partition)."""
        return self.d.task_lock(self.conn, self.name.state, self.name.task)

    def delete_applied(self, txids: Sequence[int]) -> None:
        p = self.d.p
        self._write(f"DELETE FROM squall_applied WHERE state = {p} AND task = {p} AND "
                    f"txid = {p}", [(self.name.state, self.name.task, t) for t in txids])

    # ----- State ---------------------------------------------------------

    def begin_commit(self, txid: int) -> None:
        if self._open is not None:
            raise StateError(f"batch {txid} of {self.name.state} began while batch "
                             f"{self._open} is open")
        self.d.begin(self.conn)
        self._open = txid

    def commit(self, txid: int) -> None:
        self.d.commit(self.conn)
        self._open = None

    def rollback(self, txid: int) -> None:
        self._open = None
        self.d.rollback(self.conn)

    def close(self) -> None:
        if self._open is not None:
            self.rollback(self._open)
        self.conn.close()

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        cur = self.conn.cursor()
        cur.executemany(sql, rows)
