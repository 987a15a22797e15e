"""What a store has read of its state's change log: the newest value of every key changed
since the last compaction, and which keys those are.

A SQL store does not update one row per key per batch: a batch's changes go into the log as
one record (``squall_changes``: a sequence number and the batch's keys and values), and from
time to time the keys changed since the last compaction are folded into the table of values
(``squall_state``) and their records deleted, in one batch's transaction. A random update
of a B-tree row costs a page written per key (most pages of a table, for a batch of
thousands of scattered keys); one record per batch costs its bytes, and a compaction writes
each key once however many batches changed it. This is the log-structured layout of
Kafka Streams' and Flink's state stores, on a database that stays readable by its own
tools between compactions through :meth:`SqlStore.items`.

The rules, for a store that reads the log in sequence order:

- A key's newest value is the one in the newest record holding it; a key in no record
  since the compaction has its value in the table (or none).
- Records are read from just after the last one read. If a compaction has happened past
  that point (someone else folded records this store never read), what it knows may be
  stale: it forgets everything and reads the records after the compaction.
- Compaction is due when the records hold :data:`RATIO` times as many entries as the
  store knows keys (at least as many as the records hold: each row is then written once
  for several updates), or :data:`MAX_ENTRIES` entries (a bound on the log's size and on
  the reading a new process does before its first batch).

Pure: no database; :class:`~squall.backends.sql.SqlStore` does the reading and writing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Any

from squall.core.trident.state import Key

#: Compact once the records hold this many entries per key known...
RATIO = 8
#: ...and at least this many (small logs cost little to read).
MIN_ENTRIES = 50_000
#: Compact at this many entries, whatever the ratio.
MAX_ENTRIES = 2_000_000
#: After a compaction, forget the values read if more keys than this are known.
MAX_KNOWN = 1_000_000


class ChangeLog:
    def __init__(self) -> None:
        #: The last record read (-1: none; read from the last compaction on).
        self.seq = -1
        #: key -> newest value known (from records, from the table, or written here).
        self.known: dict[Key, Any] = {}
        #: The keys of each record since the last compaction (a set only when asked for:
        #: building it per batch cost as much as writing the record).
        self._changed: list[Sequence[Key]] = []
        self._dirty: set[Key] = set()
        #: Entries in those records.
        self.entries = 0

    def behind(self, compacted: int) -> bool:
        """Must forget what it knows: records it never read were compacted."""
        return compacted > self.seq

    def reset(self, compacted: int) -> None:
        """Forget everything; the next record to read is the one after ``compacted``."""
        self.known.clear()
        self._changed.clear()
        self._dirty.clear()
        self.entries = 0
        self.seq = compacted

    def invalidate(self) -> None:
        """What is known may be wrong (a commit whose outcome is unknown): read it all again."""
        self.reset(-1)

    def apply(self, seq: int, keys: Sequence[Key], vals: Sequence[Any]) -> None:
        """Record ``seq`` (read in order, or just written) changed these keys."""
        if seq <= self.seq:
            raise ValueError(f"change record {seq} read after record {self.seq}")
        self.known.update(zip(keys, vals, strict=True))
        self._changed.append(keys)
        self.entries += len(keys)
        self.seq = seq

    def remember(self, keys: Iterable[Key], vals: Iterable[Any]) -> None:
        """Values read from the table (keys in no record since the compaction)."""
        for k, v in zip(keys, vals, strict=True):
            if v is not None:
                self.known[k] = v

    @property
    def dirty(self) -> set[Key]:
        """The keys in records since the last compaction."""
        for keys in self._changed:
            self._dirty.update(keys)
        self._changed.clear()
        return self._dirty

    def compaction_due(self, pending: Collection[Key] = ()) -> bool:
        """Is a compaction due once ``pending`` (a batch's keys, about to be a record) is?"""
        entries = self.entries + len(pending)
        return entries >= MAX_ENTRIES or (
            entries >= MIN_ENTRIES and entries >= RATIO * (len(self.known) + len(pending)))

    def dirty_items(self) -> tuple[list[Key], list[Any]]:
        keys = list(self.dirty)
        return keys, [self.known[k] for k in keys]

    def compacted(self) -> None:
        """The dirty keys are in the table now, and the records through :attr:`seq` gone."""
        self._changed.clear()
        self._dirty.clear()
        self.entries = 0
        if len(self.known) > MAX_KNOWN:
            self.known.clear()
