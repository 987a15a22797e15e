"""SQLite: the embedded default, no server. One file per topology (or any path you give);
WAL mode, so readers never wait for the writer, and Spark's Python workers on one machine
share it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from squall.backends.sql import schema
from squall.core.errors import StateError


class SqliteDialect:
    name = "sqlite"
    p = "?"

    def __init__(self, path: Path | str = "") -> None:
        self.path = Path(path)
        #: the writers' lock file, open and held while this connection's write
        #: transaction is (see :meth:`begin`)
        self._writing: IO[str] | None = None

    def _locks(self) -> Path:
        locks = self.path.parent / f"{self.path.name}.locks"
        locks.mkdir(exist_ok=True)
        return locks

    @contextlib.contextmanager
    def task_lock(self, conn: Any, state: str, task: int) -> Iterator[None]:
        # One machine's database: a file lock beside it (the database's own lock would
        # hold every other task's writes for the whole turn).
        name = hashlib.sha1(state.encode()).hexdigest()[:16]
        with open(self._locks() / f"{name}-{task}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def begin(self, conn: Any) -> None:
        # Writers take turns on a file lock first: SQLite waits for its own write lock by
        # sleeping in growing steps (up to 100 ms each) and overslept a lock held for
        # 20 ms by up to 36 ms when two tasks' batches met; a file lock wakes the next
        # writer as soon as it is let go. Readers (WAL) never wait for either.
        f = open(self._locks() / "writer.lock", "a")  # noqa: SIM115 (held until the end)
        try:
            fcntl.flock(f, fcntl.LOCK_EX)
            conn.execute("BEGIN IMMEDIATE")  # take the write lock now, not at the first write
        except BaseException:
            f.close()  # closing lets the file lock go
            raise
        self._writing = f

    def begin_read(self, conn: Any) -> None:
        conn.execute("BEGIN")  # deferred: a read snapshot, no write lock

    def commit(self, conn: Any) -> None:
        try:
            conn.execute("COMMIT")
        finally:  # SQLite's own lock still guards a transaction a failed COMMIT left open
            self._done_writing()

    def lock_changes(self, conn: Any, state: str) -> None:
        pass  # BEGIN IMMEDIATE holds the database's one write lock already

    def upsert_values(self, conn: Any, state: str, keys: list[str], values: list[str]
                      ) -> None:
        # In key order: neighbouring rows of the primary key's B-tree are written together.
        conn.executemany("INSERT INTO squall_state (state, key, value) VALUES (?, ?, ?) ON "
                         "CONFLICT (state, key) DO UPDATE SET value = excluded.value",
                         sorted(zip([state] * len(keys), keys, values, strict=True)))

    def rollback(self, conn: Any) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            self._done_writing()

    def _done_writing(self) -> None:
        if self._writing is not None:
            self._writing.close()
            self._writing = None

    def select_keys(self, conn: Any, state: str, keys: list[str]) -> list[tuple[str, str]]:
        # One statement, the keys as one JSON array: no limit on their number, and no
        # binding of thousands of parameters. CROSS JOIN keeps json_each outside (SQLite
        # otherwise may scan the table and probe the array).
        return list(conn.execute(
            "SELECT s.key, s.value FROM json_each(?) AS j CROSS JOIN squall_state AS s "
            "ON s.state = ? AND s.key = j.value", (orjson.dumps(keys).decode(), state)))


def connect(path: Path | str, timeout_s: float = 60.0) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are begun explicitly), the schema made."""
    try:
        conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at each checkpoint
        conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: a batch's keys stay in memory
        # Setting WAL and making the tables need locks that SQLite's busy timeout does not
        # always wait for: when many Python workers connect at once ("database is locked"
        # failed micro-batches in a chaos run). Both persist in the file: read first (no
        # lock), write only if missing, and retry the write while another holds the lock.
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                             "'table'")}
        wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        if not wal or not {"squall_state", "squall_applied", "squall_tasks", "squall_changes",
                           "squall_compacted", "squall_kv", "squall_kv_turns",
                           "squall_kv_log"} <= tables:
            _retry_locked(lambda: _setup(conn), timeout_s)
    except sqlite3.Error as e:
        raise StateError(f"cannot open the SQLite state {path}: {e}") from None
    return conn


def _setup(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    for stmt in schema(" WITHOUT ROWID"):
        conn.execute(stmt)


def _retry_locked(step: Callable[[], None], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(delay)  # a backoff on a lock held by another process, not a sync
            delay = min(0.5, delay * 2)
