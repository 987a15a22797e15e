"""A task's keyed state (pure): what it records as changed."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from squall.core.bolt_api.state import DELETED, KeyValueState


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


keys = st.one_of(st.text(max_size=3), st.integers(-3, 3))
ops = st.lists(st.tuples(st.sampled_from(["put", "delete", "drain"]), keys, st.integers()),
               max_size=60)


@given(ops)
def test_replaying_the_drained_changes_rebuilds_the_state(script: list[tuple[str, Any, int]]
                                                         ) -> None:
    """What one worker writes, batch by batch, is enough for another to arrive at its
    state."""
    mine, batches = KeyValueState(), []
    for op, k, v in script:
        if op == "put":
            mine.put(k, v)
        elif op == "delete":
            mine.delete(k)
        else:
            batches.append(mine.changes())
    batches.append(mine.changes())
    other = KeyValueState({"stale": 1})
    other.apply({}, replace=True)
    for changes in batches:
        other.apply(changes)
    assert dict(other) == dict(mine)
