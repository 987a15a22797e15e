"""A task's state log on disk: state follows the task between workers and across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.bolts.state_log import TaskStateLog, log_path
from squall.core.errors import StateError
from squall.core.state import KeyValueState


def worker(path: Path, compact: int = 1 << 20) -> TaskStateLog:
    """One Python worker's view of the task: its own state object, its own read position."""
    return TaskStateLog(path, KeyValueState(), compact)


def batch(log: TaskStateLog, **puts: int) -> None:
    with log.turn() as state:
        for k, v in puts.items():
            state[k] = state.get(k, 0) + v


def test_the_state_follows_the_task_from_worker_to_worker(tmp_path: Path) -> None:
    path = log_path(tmp_path / "count" / "squall-state", 0)
    a, b = worker(path), worker(path)
    batch(a, the=2, cow=1)
    batch(b, the=1)  # b runs the task next: it sees a's counts first
    assert dict(b.state) == {"the": 3, "cow": 1}
    batch(a, moon=1)  # and a, running it again, sees b's
    assert dict(a.state) == {"the": 3, "cow": 1, "moon": 1}
    assert a.catch_up() == 0  # nothing new: a stat, no read


def test_a_restart_reads_the_state_back(tmp_path: Path) -> None:
    path = log_path(tmp_path, 1)
    first = worker(path)
    for _ in range(5):
        batch(first, n=1)
    with first.turn() as state:
        del state["n"]
        state["m"] = 7
    again = worker(path)
    again.catch_up()
    assert dict(again.state) == {"m": 7}


def test_a_failed_batch_leaves_no_changes_and_the_worker_rereads(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    a, b = worker(path), worker(path)
    batch(a, n=1)
    with pytest.raises(RuntimeError), a.turn() as state:
        state["n"] = 100
        raise RuntimeError("not confirmed by Kafka")
    b.catch_up()
    assert dict(b.state) == {"n": 1}
    batch(a, n=1)  # a's half-done change was dropped: it starts again from the log
    assert dict(a.state) == {"n": 2}


def test_the_log_is_compacted_and_other_workers_reload_it(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    a, b = worker(path, compact=2_000), worker(path, compact=2_000)
    batch(b, keep=1)
    for i in range(200):
        batch(a, **{f"k{i % 7}": 1})
    assert path.stat().st_size < 2_000 * 2  # rewritten, not 200 records long
    batch(b, keep=1)
    assert b.state["keep"] == 2 and sum(v for k, v in b.state.items() if k != "keep") == 200
    assert not path.with_suffix(".tmp").exists()


def test_a_torn_tail_from_a_crash_is_overwritten(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    a = worker(path)
    batch(a, n=1)
    with open(path, "ab") as f:
        f.write(b"SQS1D\x00\x00\x01\x00")  # a record cut short by a crash
    b = worker(path)
    batch(b, n=1)
    c = worker(path)
    c.catch_up()
    assert dict(c.state) == {"n": 2}


def test_a_damaged_log_is_a_clear_error(tmp_path: Path) -> None:
    path = log_path(tmp_path, 3)
    batch(worker(path), n=1)
    path.write_bytes(b"X" * 40)
    with pytest.raises(StateError, match=r"task-3.log: no state record at byte 0"):
        worker(path).catch_up()


def test_a_removed_log_starts_the_state_over(tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    a = worker(path)
    batch(a, n=1)
    path.unlink()
    batch(a, m=1)
    assert dict(a.state) == {"m": 1}
