"""A user-defined Trident backend: opaque counts in a table of the user's own shape.

Squall's SQL store keeps values as JSON in ``squall_state``. A team that wants its counts
as plain columns (``SELECT word, curr FROM word_counts``) writes a backing map of its own:
Trident's ``IBackingMap`` is two methods, ``multi_get`` and ``multi_put``. Subclassing
:class:`~squall.backends.sql.SqlStore` keeps the rest: the applied records (Storm-level
replays) and the transaction that commits them with the values. Use it in a topology with
``state: {kind: opaque, backend: "examples.counts_table:WordCountsTable"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from squall.backends import connect
from squall.backends.sql import SqlStore, StoreName
from squall.core.errors import StateError
from squall.trident import MapKind, OpaqueValue

_CHUNK = 500  # keys per SELECT: well under every database's parameter limit


class WordCountsTable(SqlStore):
    """``word_counts(state, word, txid, curr, prev)``: one row per word."""

    def __init__(self, url: str, name: StoreName) -> None:
        if name.kind is not MapKind.OPAQUE:
            raise StateError(f"word_counts keeps opaque values, not {name.kind.value}")
        super().__init__(*connect(url), name)
        self.conn.execute("CREATE TABLE IF NOT EXISTS word_counts (state TEXT NOT NULL, "
                          "word TEXT NOT NULL, txid BIGINT NOT NULL, curr BIGINT NOT NULL, "
                          "prev BIGINT, PRIMARY KEY (state, word))")

    def multi_get(self, keys: Sequence[tuple[Any, ...]]) -> list[Any]:
        p, found = self.d.p, {}
        words = [str(k[0]) for k in keys]
        for i in range(0, len(words), _CHUNK):
            part = words[i:i + _CHUNK]
            rows = self.conn.execute(
                f"SELECT word, txid, curr, prev FROM word_counts WHERE state = {p} AND word "
                f"IN ({', '.join([p] * len(part))})", (self.name.state, *part)).fetchall()
            found.update({w: OpaqueValue(t, c, pr) for w, t, c, pr in rows})
        return [found.get(w) for w in words]

    def multi_put(self, keys: Sequence[tuple[Any, ...]], vals: Sequence[Any]) -> None:
        p = self.d.p
        self.conn.cursor().executemany(
            f"INSERT INTO word_counts (state, word, txid, curr, prev) VALUES ({p}, {p}, {p}, "
            f"{p}, {p}) ON CONFLICT (state, word) DO UPDATE SET txid = excluded.txid, "
            "curr = excluded.curr, prev = excluded.prev",
            [(self.name.state, str(k[0]), v.curr_txid, v.curr, v.prev)
             for k, v in zip(keys, vals, strict=True)])
