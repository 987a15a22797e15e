"""PostgreSQL: a real server, for state that every machine of a Spark cluster reaches.

One connection per task's store, in autocommit mode with explicit transactions (a batch's
``begin_commit`` .. ``commit``); writes are sent with psycopg's pipelined ``executemany``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from squall.backends.sql import schema
from squall.core.errors import StateError, StateUnavailable

#: Serialises schema creation: concurrent CREATE TABLE IF NOT EXISTS can collide.
_SCHEMA_LOCK = 0x5351_5541_4C4C


class PostgresDialect:
    name = "postgresql"
    p = "%s"

    def begin(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def begin_read(self, conn: Any) -> None:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot

    def commit(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def lock_changes(self, conn: Any, state: str) -> None:
        # Records are numbered by their writer: the next number is taken under this lock,
        # so a reader never sees a record while an older one is still uncommitted.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s), -1)", (state,))

    def upsert_values(self, conn: Any, state: str, keys: list[str], values: list[str]
                      ) -> None:
        # One statement, the rows as two arrays: no round trip per row.
        conn.execute("INSERT INTO squall_state (state, key, value) SELECT %s, k, v FROM "
                     "unnest(%s::text[], %s::text[]) AS u(k, v) ORDER BY k ON CONFLICT "
                     "(state, key) DO UPDATE SET value = excluded.value",
                     (state, keys, values))

    def rollback(self, conn: Any) -> None:
        conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def task_lock(self, conn: Any, state: str, task: int) -> Iterator[None]:
        # A session lock every machine sees; released when the connection dies, too.
        conn.execute("SELECT pg_advisory_lock(hashtext(%s), %s)", (state, task))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s), %s)", (state, task))

    def select_keys(self, conn: Any, state: str, keys: list[str]) -> list[tuple[str, str]]:
        cur = conn.execute("SELECT key, value FROM squall_state WHERE state = %s "
                           "AND key = ANY(%s)", (state, keys))
        return list(cur.fetchall())


def connect(conninfo: str, timeout_s: float = 30.0) -> Any:
    import psycopg

    try:
        # UTF-8 named: a database created in SQL_ASCII (initdb without a UTF-8 locale) would
        # hand text back as bytes.
        conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=int(timeout_s),
                               client_encoding="utf8")
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        for stmt in schema(blob="BYTEA"):
            conn.execute(stmt)
        conn.execute("COMMIT")
    except psycopg.OperationalError as e:
        raise StateUnavailable(f"the PostgreSQL state at {_safe(conninfo)} does not answer: "
                               f"{str(e).strip()}") from None
    except psycopg.Error as e:
        raise StateError(f"cannot open the PostgreSQL state at {_safe(conninfo)}: "
                         f"{str(e).strip()}") from None
    return conn


def _safe(conninfo: str) -> str:
    """The URL without its password."""
    if "@" in conninfo and "://" in conninfo:
        scheme, rest = conninfo.split("://", 1)
        cred, host = rest.rsplit("@", 1)
        return f"{scheme}://{cred.split(':', 1)[0]}@{host}"
    return conninfo
