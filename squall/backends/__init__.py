"""Trident State backends on real databases: SQLite (embedded, the default) and PostgreSQL.

Both store a state's values and its tasks' applied records in two tables, written in one
transaction per batch (:mod:`squall.backends.sql`). :func:`open_store` picks one by URL.
"""

from __future__ import annotations

from pathlib import Path

from squall.backends.sql import SqlStore, StoreName
from squall.core.errors import StateError


def open_store(url: str, name: StoreName) -> SqlStore:
    """``postgresql://...`` (or ``postgres://``), ``sqlite:///path``, or a file path."""
    if url.startswith(("postgresql://", "postgres://")):
        from squall.backends import postgres

        return postgres.store(url, name)
    from squall.backends import sqlite

    path = url.removeprefix("sqlite://") if url.startswith("sqlite://") else url
    if not path:
        raise StateError(f"state URL {url!r} names no database")
    return sqlite.store(Path(path), name)
