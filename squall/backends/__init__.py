"""Trident State backends on real databases: SQLite (embedded, the default) and PostgreSQL.

Both store a state's values and its tasks' applied records in two tables, written in one
transaction per batch (:mod:`squall.backends.sql`), and stateful bolts' keyed state in two
more (:mod:`squall.backends.kv`). :func:`open_store` and :func:`open_kv` pick one by URL.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from squall.backends.kv import KeyValueStore
from squall.backends.sql import Dialect, SqlStore, StoreName
from squall.core.errors import StateError, StateUnavailable
from squall.core.topology.trident import StateOptions


def default_state_path(checkpoints: Path, topology_id: str) -> Path:
    """Where a topology's state lives when no database is named: SQLite beside its
    checkpoints (it outlives them: a kill's teardown keeps the files ``state.db*``)."""
    return checkpoints / topology_id / "state.db"


def connect(url: str) -> tuple[Any, Dialect]:
    """A connection to ``postgresql://...`` (or ``postgres://``), ``sqlite:///path`` or a
    file path, with the tables made, and its dialect."""
    if url.startswith(("postgresql://", "postgres://")):
        from squall.backends import postgres

        return postgres.connect(url), postgres.PostgresDialect()
    from squall.backends import sqlite

    path = url.removeprefix("sqlite://") if url.startswith("sqlite://") else url
    if not path:
        raise StateError(f"state URL {url!r} names no database")
    return sqlite.connect(Path(path)), sqlite.SqliteDialect(path)


def unavailable(e: BaseException) -> bool:
    """Whether ``e`` says the database does not answer (its connection refused, lost or
    shut down by the server), not that a statement or a record was wrong."""
    if isinstance(e, StateUnavailable):
        return True
    if type(e).__module__.split(".")[0] != "psycopg":
        return False
    import psycopg

    return isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError))


def answers(url: str, timeout_s: float = 3.0) -> bool:
    """Whether the database at ``url`` takes a connection and a query now."""
    if not url.startswith(("postgresql://", "postgres://")):
        return True  # SQLite: a file beside the process
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=max(1, int(timeout_s))) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


#: Every table that holds a state's rows, by its ``state`` column.
STATE_TABLES = ("squall_state", "squall_applied", "squall_tasks", "squall_changes",
                "squall_compacted", "squall_kv", "squall_kv_turns", "squall_kv_log")


def purge(url: str, topology_id: str) -> int:
    """Delete the states Squall named for a topology's id (``<id>.<component>``) from the
    database at ``url``, in one transaction; the rows deleted."""
    conn, d = connect(url)
    prefix = f"{topology_id}."
    try:
        d.begin(conn)
        n = 0
        for table in STATE_TABLES:
            cur = conn.execute(f"DELETE FROM {table} WHERE substr(state, 1, {d.p}) = {d.p}",
                               (len(prefix), prefix))
            n += max(cur.rowcount, 0)
        d.commit(conn)
        return n
    except Exception as e:
        d.rollback(conn)
        raise StateError(f"could not purge the state of {topology_id!r} at {url}: {e}"
                         ) from None
    finally:
        conn.close()


def open_store(url: str, name: StoreName) -> SqlStore:
    """A Trident state's store for one task (see :func:`connect` for ``url``)."""
    return SqlStore(*connect(url), name)


def open_state(options: StateOptions, default_url: str, task: int) -> Any:
    """A stateful component's store for one task, as its spec's ``state:`` says: Squall's
    SQL store, or the user-defined ``backend`` (``Class(url, StoreName)``)."""
    url = options.url or default_url
    name = StoreName(options.name or "", task, options.kind)
    if options.backend is None:
        return open_store(url, name)
    mod, _, cls = options.backend.partition(":")
    try:
        return getattr(importlib.import_module(mod), cls)(url, name)
    except StateError:
        raise
    except Exception as e:  # the user's class: any failure is a failed open
        raise StateError(f"state backend {options.backend!r} failed to open {name.state!r}: "
                         f"{type(e).__name__}: {e}") from None


def open_kv(url: str, state: str, task: int, tasks: int | None = None) -> KeyValueStore:
    """A stateful bolt task's keyed state (see :func:`connect` for ``url``); ``tasks``:
    the bolt's parallelism, checked against the one the state was kept by."""
    store = KeyValueStore(*connect(url), state, task)
    if tasks is not None:
        try:
            store.claim_tasks(tasks)
        except BaseException:
            store.close()
            raise
    return store
