"""Trident State backends on real databases: SQLite (embedded, the default) and PostgreSQL.

Both store a state's values and its tasks' applied records in two tables, written in one
transaction per batch (:mod:`squall.backends.sql`), and stateful bolts' keyed state in two
more (:mod:`squall.backends.kv`). :func:`open_store` and :func:`open_kv` pick one by URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from squall.backends.kv import KeyValueStore
from squall.backends.sql import Dialect, SqlStore, StoreName
from squall.core.errors import StateError


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


def open_store(url: str, name: StoreName) -> SqlStore:
    """A Trident state's store for one task (see :func:`connect` for ``url``)."""
    return SqlStore(*connect(url), name)


def open_kv(url: str, state: str, task: int) -> KeyValueStore:
    """A stateful bolt task's keyed state (see :func:`connect` for ``url``)."""
    return KeyValueStore(*connect(url), state, task)
