"""A micro-batch's ranges planned in the driver from Spark's offset log (no executor read):
the same ranges the edge source plans for the same offsets."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from services.bolts.planning import (
    TaskPartition,
    logged_partitions,
    next_offsets,
    plan_partitions,
)

TOPICS = ["e.a", "e.b"]


def log_entry(checkpoint: Path, batch_id: int, offsets: dict[str, int]) -> None:
    d = checkpoint / "offsets"
    d.mkdir(parents=True, exist_ok=True)
    (d / str(batch_id)).write_text("v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n"
                                   + json.dumps(offsets))


def test_a_batch_runs_from_the_previous_entry_to_its_own(tmp_path: Path) -> None:
    log_entry(tmp_path, 0, {"e.a:0": 5, "e.a:1": 0, "e.b:0": 2, "e.b:1": 0})
    log_entry(tmp_path, 1, {"e.a:0": 9, "e.a:1": 3, "e.b:0": 2, "e.b:1": 0})
    assert logged_partitions(tmp_path, 0, TOPICS, [0, 1]) == [
        TaskPartition(0, [("e.a", 0, 0, 5), ("e.b", 0, 0, 2)])]
    assert logged_partitions(tmp_path, 1, TOPICS, [0, 1]) == [
        TaskPartition(0, [("e.a", 0, 5, 9)]), TaskPartition(1, [("e.a", 1, 0, 3)])]


def test_a_log_it_cannot_read_sends_the_batch_through_the_source(tmp_path: Path) -> None:
    assert logged_partitions(tmp_path, 3, TOPICS, [0]) is None  # no entry
    log_entry(tmp_path, 2, {"e.a:0": 1})
    assert logged_partitions(tmp_path, 3, TOPICS, [0]) is None  # no entry of its own
    (tmp_path / "offsets" / "3").write_text("v1\n{}\n{not json")
    assert logged_partitions(tmp_path, 3, TOPICS, [0]) is None
    (tmp_path / "offsets" / "3").write_text('v1\n{}\n{"e.a:0": "x"}')
    assert logged_partitions(tmp_path, 3, TOPICS, [0]) is None


offsets = st.dictionaries(st.sampled_from([f"{t}:{p}" for t in TOPICS for p in range(3)]),
                          st.integers(0, 1000))


@given(offsets, offsets)
def test_the_log_plans_what_the_source_plans(start: dict[str, int], grow: dict[str, int]
                                              ) -> None:
    end = {k: start.get(k, 0) + grow.get(k, 0) for k in start.keys() | grow.keys()}
    with tempfile.TemporaryDirectory() as d:
        log_entry(Path(d), 6, start)
        log_entry(Path(d), 7, end)
        assert logged_partitions(Path(d), 7, TOPICS, [0, 1, 2]) == \
            plan_partitions(TOPICS, [0, 1, 2], start, end)


@given(st.dictionaries(st.sampled_from([f"{t}:{p}" for t in TOPICS for p in (0, 1)]),
                       st.integers(0, 50)),
       st.dictionaries(st.sampled_from([f"{t}:{p}" for t in TOPICS for p in (0, 1)]),
                       st.integers(0, 50)),
       st.one_of(st.none(), st.integers(1, 60)))
def test_the_next_end_takes_what_is_there_within_the_budget(
        begun: dict[str, int], more: dict[str, int], budget: int | None) -> None:
    start = {**{f"{t}:{p}": 0 for t in TOPICS for p in (0, 1)}, **begun}
    ends = {k: start[k] + more.get(k, 0) for k in start}
    out = next_offsets(start, ends, budget)
    assert all(start[k] <= out[k] <= ends[k] for k in ends)
    taken = sum(out[k] - start[k] for k in ends)
    waiting = sum(ends[k] - start[k] for k in ends)
    assert taken == (waiting if budget is None else min(budget, waiting))
    with_data = [k for k in ends if ends[k] > start[k]]
    if budget is not None and budget >= len(with_data):  # none starves
        assert all(out[k] > start[k] for k in with_data)
