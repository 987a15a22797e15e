"""The change log's reading rules: several stores writing and reading one state, with
compactions at any point, always read the newest value of every key.

The database is a model here (a dict for the table, a list of records, the compacted
mark); the steps are the ones :class:`~squall.backends.sql.SqlStore` takes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.trident import change_log
from squall.core.trident.change_log import ChangeLog


@dataclass
class Db:
    table: dict[Any, int] = field(default_factory=dict)
    records: list[tuple[int, dict[Any, int]]] = field(default_factory=list)
    compacted: int = 0


def catch_up(db: Db, log: ChangeLog) -> None:
    if log.behind(db.compacted):
        log.reset(db.compacted)
    for seq, changes in db.records:
        if seq > log.seq:
            log.apply(seq, list(changes), list(changes.values()))


def read(db: Db, log: ChangeLog, key: Any) -> int | None:
    catch_up(db, log)
    if key in log.known:
        known: int = log.known[key]
        return known
    v = db.table.get(key)
    log.remember([key], [v])
    return v


def write(db: Db, log: ChangeLog, changes: dict[Any, int], compact: bool) -> None:
    catch_up(db, log)
    seq = log.seq + 1
    db.records.append((seq, changes))
    log.apply(seq, list(changes), list(changes.values()))
    if compact:
        keys, vals = log.dirty_items()
        db.table.update(zip(keys, vals, strict=True))
        db.records = [(s, c) for s, c in db.records if s > seq]
        db.compacted = seq
        log.compacted()


ops = st.lists(st.tuples(
    st.integers(0, 2),  # which store
    st.one_of(st.tuples(st.just("read"), st.integers(0, 5)),
              st.tuples(st.just("write"), st.dictionaries(st.integers(0, 5),
                                                          st.integers(0, 99), min_size=1,
                                                          max_size=3), st.booleans()))),
    max_size=40)


@settings(max_examples=300)
@given(ops)
def test_every_store_reads_the_newest_value_through_any_compaction(steps: list[Any]) -> None:
    db, truth = Db(), dict[int, int]()
    logs = [ChangeLog() for _ in range(3)]
    for who, op in steps:
        if op[0] == "read":
            assert read(db, logs[who], op[1]) == truth.get(op[1])
        else:
            write(db, logs[who], op[1], op[2])
            truth.update(op[1])
    for log in logs:
        assert {k: read(db, log, k) for k in range(6)} == {k: truth.get(k) for k in range(6)}


def test_a_record_out_of_order_is_refused() -> None:
    log = ChangeLog()
    log.apply(3, [("a",)], [1])
    with pytest.raises(ValueError, match="record 2 read after record 3"):
        log.apply(2, [("a",)], [2])


def test_compaction_is_due_by_ratio_or_by_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_log, "MIN_ENTRIES", 10)
    monkeypatch.setattr(change_log, "MAX_ENTRIES", 100)
    log = ChangeLog()
    for seq in range(1, 10):  # the same 2 keys again and again: 18 entries, 2 keys
        log.apply(seq, [("a",), ("b",)], [seq, seq])
    assert log.dirty == {("a",), ("b",)}
    assert log.compaction_due()
    log.compacted()
    assert not log.compaction_due() and log.entries == 0 and log.known and not log.dirty
    fresh = {(i,): i for i in range(60)}
    log.apply(10, list(fresh), list(fresh.values()))
    assert not log.compaction_due()  # 60 entries for 62 keys known: no ratio, under the bound
    assert log.compaction_due({(i,): 0 for i in range(60, 100)})  # 100 entries
