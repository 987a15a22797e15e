"""A task's keyed state and its log records (pure)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.errors import StateError
from squall.core.state import DELETED, DELTA, SNAPSHOT, KeyValueState, decode, encode


def test_storms_names_and_the_mapping_protocol_record_changes() -> None:
    s = KeyValueState()
    s.put("a", 1)
    s["b"] = [2]
    assert s.get("a") == 1 and s.get("zz") is None and s.get("zz", 0) == 0
    assert s.delete("a") == 1 and "a" not in s
    assert s.changes() == {"a": DELETED, "b": [2]}
    assert s.changes() == {}  # drained
    del s["b"]
    assert len(s) == 0 and s.changes() == {"b": DELETED}


def test_applied_changes_are_not_changes_of_this_worker() -> None:
    s = KeyValueState({"x": 1})
    s.apply({"y": 2, "x": DELETED})
    assert dict(s) == {"y": 2} and s.changes() == {}
    s.apply({"z": 3}, replace=True)
    assert dict(s) == {"z": 3}


def test_records_round_trip_and_deleted_stays_the_marker() -> None:
    buf = encode({"a": 1, ("t", 2): DELETED}) + encode({"k": "v"}, SNAPSHOT)
    records, used = decode(buf)
    assert used == len(buf)
    assert [r.kind for r in records] == [DELTA, SNAPSHOT]
    assert records[0].changes[("t", 2)] is DELETED
    assert records[1].changes == {"k": "v"}


def test_a_torn_last_record_is_left_out_not_an_error() -> None:
    whole = encode({"a": 1})
    buf = whole + encode({"b": 2})[:-3]
    records, used = decode(buf)
    assert used == len(whole) and [r.changes for r in records] == [{"a": 1}]


def test_a_damaged_record_is_named_by_its_offset() -> None:
    first = encode({"a": 1})
    second = bytearray(encode({"b": 2}))
    second[-1] ^= 0xFF
    at = 100 + len(first)
    with pytest.raises(StateError, match=f"task-0.log: damaged state record at byte {at}"):
        decode(first + bytes(second), "task-0.log", 100)
    with pytest.raises(StateError, match="no state record at byte 0"):
        decode(b"garbage-garbage-garbage")


def test_an_unsaveable_value_names_its_key() -> None:
    with pytest.raises(StateError, match="'lock'"):
        encode({"ok": 1, "lock": threading.Lock()})


keys = st.one_of(st.text(max_size=3), st.integers(-3, 3))
ops = st.lists(st.tuples(st.sampled_from(["put", "delete", "drain"]), keys, st.integers()),
               max_size=60)


@given(ops)
def test_replaying_the_drained_changes_rebuilds_the_state(script: list[tuple[str, Any, int]]
                                                         ) -> None:
    """What one worker logs, batch by batch, is enough for another to arrive at its state."""
    mine, log = KeyValueState(), b""
    for op, k, v in script:
        if op == "put":
            mine.put(k, v)
        elif op == "delete":
            mine.delete(k)
        else:
            log += encode(mine.changes())
    log += encode(mine.changes())
    other = KeyValueState({"stale": 1})
    records, _ = decode(log)
    other.apply({}, replace=True)
    for r in records:
        other.apply(r.changes)
    assert dict(other) == dict(mine)
