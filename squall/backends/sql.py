"""A state's store in a SQL database: the backing map and the applied records of one task.

Two tables, shared by every state of a database::

    squall_state   (state, key, value)          one row per key: JSON (squall.core.trident.codec)
    squall_changes (state, seq, task, txid, body)  the change log since the last compaction,
                                                one record per batch (change_log)
    squall_compacted (state, seq)               the last record folded into squall_state
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
from squall.core.trident.change_log import ChangeLog
from squall.core.trident.codec import (
    MapKind,
    decode_changes,
    decode_key,
    decode_value,
    decode_values,
    encode_changes,
    encode_keys,
    encode_values,
)
from squall.core.trident.state import Key


def schema(table_suffix: str = "", blob: str = "BLOB") -> tuple[str, ...]:
    """The tables; ``table_suffix`` is appended to each CREATE TABLE (SQLite: WITHOUT
    ROWID, so a row lives in its primary key's B-tree, written once); ``blob``: the
    database's byte string type. ``squall_kv``, ``squall_kv_turns`` and ``squall_kv_log``
    hold stateful bolts' keyed state (:mod:`squall.backends.kv`)."""
    return (
        "CREATE TABLE IF NOT EXISTS squall_state (state TEXT NOT NULL, key TEXT NOT NULL, "
        f"value TEXT NOT NULL, PRIMARY KEY (state, key)){table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_applied (state TEXT NOT NULL, task INTEGER NOT "
        "NULL, txid BIGINT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (state, task, txid))"
        f"{table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_tasks (state TEXT NOT NULL, task INTEGER NOT NULL, "
        f"mark TEXT NOT NULL, PRIMARY KEY (state, task)){table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_changes (state TEXT NOT NULL, seq BIGINT NOT NULL, "
        f"task INTEGER NOT NULL, txid BIGINT NOT NULL, body {blob} NOT NULL, PRIMARY KEY "
        f"(state, seq)){table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_compacted (state TEXT NOT NULL PRIMARY KEY, "
        f"seq BIGINT NOT NULL){table_suffix}",
        f"CREATE TABLE IF NOT EXISTS squall_kv (state TEXT NOT NULL, task INTEGER NOT NULL, "
        f"key {blob} NOT NULL, value {blob} NOT NULL, PRIMARY KEY (state, task, key))"
        f"{table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_kv_turns (state TEXT NOT NULL, task INTEGER NOT "
        f"NULL, turn BIGINT NOT NULL, PRIMARY KEY (state, task)){table_suffix}",
        "CREATE TABLE IF NOT EXISTS squall_kv_log (state TEXT NOT NULL, task INTEGER NOT NULL, "
        f"turn BIGINT NOT NULL, changes {blob} NOT NULL, PRIMARY KEY (state, task, turn))"
        f"{table_suffix}",
    )


class Dialect(Protocol):
    """What differs between the databases."""

    name: str
    #: the DB-API placeholder
    p: str

    def begin(self, conn: Any) -> None: ...

    def commit(self, conn: Any) -> None: ...

    def rollback(self, conn: Any) -> None: ...

    def begin_read(self, conn: Any) -> None:
        """A transaction that only reads (one snapshot for the log and the table)."""
        ...

    def select_keys(self, conn: Any, state: str, keys: list[str]) -> list[tuple[str, str]]: ...

    def lock_changes(self, conn: Any, state: str) -> None:
        """Held until the transaction ends: one writer of a state's change log at a time."""
        ...

    def upsert_values(self, conn: Any, state: str, keys: list[str], values: list[str]
                      ) -> None:
        """Write these rows of ``squall_state`` (a compaction)."""
        ...

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
    """Trident's ``IBackingMap`` plus the task's applied records, over one connection.

    Values are written as a change log (:mod:`squall.core.trident.change_log`): a batch's
    puts are one record of ``squall_changes``, written with its applied record and task mark
    in the batch's transaction, and folded into ``squall_state`` when a compaction is due.
    Reads come from what the store has read of the log, then from the table."""

    def __init__(self, conn: Any, dialect: Dialect, name: StoreName) -> None:
        self.conn = conn
        self.d = dialect
        self.name = name
        self._open: int | None = None
        self.log = ChangeLog()
        #: This batch's puts, applied to the log once its transaction commits.
        self._batch: dict[Key, Any] = {}
        self._seq = 0  # the record this batch writes
        self._compacting = False  # and whether it compacts

    # ----- BackingMap ----------------------------------------------------

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        if not keys:
            return []
        if self._open is None:  # a reader outside a batch: the log and table as of now
            self.d.begin_read(self.conn)
            try:
                self._catch_up()
                return self._get(keys)
            finally:
                self.d.rollback(self.conn)
        return self._get(keys)

    def _get(self, keys: Sequence[Key]) -> list[Any]:
        known, batch = self.log.known, self._batch
        vals = ([batch[k] if k in batch else known.get(k) for k in keys] if batch
                else [known.get(k) for k in keys])
        missing = [i for i, v in enumerate(vals) if v is None]
        if missing:
            want = [keys[i] for i in missing]
            texts = encode_keys(want)
            found = dict(self.d.select_keys(self.conn, self.name.state, texts))
            got = decode_values(self.name.kind, [found.get(t) for t in texts])
            self.log.remember(want, got)
            for i, v in zip(missing, got, strict=True):
                vals[i] = v
        return vals

    def multi_put(self, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        if not keys:
            return
        if self._open is None:
            raise StateError(f"multi_put on {self.name.state!r} outside a batch: call "
                             "begin_commit(txid) first")
        self._batch.update(zip(keys, vals, strict=True))

    def items(self) -> list[tuple[Key, Any]]:
        """Every key of the state with its newest value (for inspection and checks): the
        table, overlaid with the change log since its last compaction (every task's)."""
        p = self.d.p
        self.d.begin_read(self.conn)
        try:
            self._catch_up()
            cur = self.conn.cursor()
            cur.execute(f"SELECT key, value FROM squall_state WHERE state = {p}",
                        (self.name.state,))
            out = {decode_key(k): decode_value(self.name.kind, v) for k, v in cur.fetchall()}
        finally:
            self.d.rollback(self.conn)
        out.update((k, self.log.known[k]) for k in self.log.dirty)
        return list(out.items())

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
        self._batch = {}
        try:
            self._catch_up()  # what other processes wrote since this one's last batch
        except BaseException:
            self.rollback(txid)
            raise

    def commit(self, txid: int) -> None:
        try:
            if self._batch:
                self._write_changes(txid)
            self.d.commit(self.conn)
        except BaseException:
            self.log.invalidate()  # the commit's outcome is unknown: read it all again
            self._open = None
            self._batch = {}
            self.d.rollback(self.conn)
            raise
        self._open = None
        if self._batch:
            self._apply_written()

    def rollback(self, txid: int) -> None:
        self._open = None
        self._batch = {}
        self.d.rollback(self.conn)

    def close(self) -> None:
        if self._open is not None:
            self.rollback(self._open)
        self.conn.close()

    # ----- the change log ------------------------------------------------

    def _catch_up(self) -> None:
        """Read the records written since the last one read (in the open transaction)."""
        p, state, kind, log = self.d.p, self.name.state, self.name.kind, self.log
        row = self.conn.execute(f"SELECT seq FROM squall_compacted WHERE state = {p}",
                                (state,)).fetchone()
        compacted = 0 if row is None else int(row[0])
        if log.behind(compacted):
            log.reset(compacted)
        cur = self.conn.execute(f"SELECT seq, body FROM squall_changes WHERE state = {p} AND "
                                f"seq > {p} ORDER BY seq", (state, log.seq))
        for seq, body in cur.fetchall():
            log.apply(int(seq), *decode_changes(kind, bytes(body)))

    def _write_changes(self, txid: int) -> None:
        p, state = self.d.p, self.name.state
        self.d.lock_changes(self.conn, state)  # one writer of the log at a time
        self._catch_up()  # PostgreSQL: others may have written since this batch began
        keys, vals = list(self._batch), list(self._batch.values())
        self._seq = self.log.seq + 1
        self._write(f"INSERT INTO squall_changes (state, seq, task, txid, body) VALUES "
                    f"({p}, {p}, {p}, {p}, {p})",
                    [(state, self._seq, self.name.task, txid,
                      encode_changes(self.name.kind, keys, vals))])
        self._compacting = self.log.compaction_due(self._batch)
        if self._compacting:
            merged = {k: self.log.known[k] for k in self.log.dirty}
            merged.update(self._batch)
            self.d.upsert_values(self.conn, state, encode_keys(list(merged)),
                                 encode_values(self.name.kind, list(merged.values())))
            self._write(f"DELETE FROM squall_changes WHERE state = {p} AND seq <= {p}",
                        [(state, self._seq)])
            self._write(f"INSERT INTO squall_compacted (state, seq) VALUES ({p}, {p}) "
                        "ON CONFLICT (state) DO UPDATE SET seq = excluded.seq",
                        [(state, self._seq)])

    def _apply_written(self) -> None:
        self.log.apply(self._seq, list(self._batch), list(self._batch.values()))
        if self._compacting:
            self.log.compacted()
        self._batch = {}

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        cur = self.conn.cursor()
        cur.executemany(sql, rows)
