"""SQLite: the embedded default, no server. One file per topology (or any path you give);
WAL mode, so readers never wait for the writer, and Spark's Python workers on one machine
share it."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from squall.backends.sql import schema
from squall.core.errors import StateError


class SqliteDialect:
    name = "sqlite"
    p = "?"

    def __init__(self, path: Path | str = "") -> None:
        self.path = Path(path)

    @contextlib.contextmanager
    def task_lock(self, conn: Any, state: str, task: int) -> Iterator[None]:
        # One machine's database: a file lock beside it (the database's own lock would
        # hold every other task's writes for the whole turn).
        locks = self.path.parent / f"{self.path.name}.locks"
        locks.mkdir(exist_ok=True)
        name = hashlib.sha1(state.encode()).hexdigest()[:16]
        with open(locks / f"{name}-{task}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def begin(self, conn: Any) -> None:
        conn.execute("BEGIN IMMEDIATE")  # take the write lock now, not at the first write

    def commit(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def rollback(self, conn: Any) -> None:
        if conn.in_transaction:
            conn.execute("ROLLBACK")

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
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at each checkpoint
        conn.execute("PRAGMA cache_size=-32768")  # 32 MiB: a batch's keys stay in memory
        for stmt in schema(" WITHOUT ROWID"):
            conn.execute(stmt)
    except sqlite3.Error as e:
        raise StateError(f"cannot open the SQLite state {path}: {e}") from None
    return conn
