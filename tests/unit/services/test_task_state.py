"""A stateful task's state in the state database (SQLite, Python's own: no server):
state follows the task between workers and across restarts; a zombie cannot write."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.bolts.task_state import TaskState
from squall.backends import kv, open_kv
from squall.core.bolt_api.state import KeyValueState
from squall.core.errors import StateError


def worker(db: Path, task: int = 0) -> TaskState:
    """One Python worker's view of the task: its own connection, its own state object."""
    return TaskState(open_kv(str(db), "wc.count", task), KeyValueState())


def batch(w: TaskState, **puts: int) -> None:
    with w.turn() as state:
        for k, v in puts.items():
            state[k] = state.get(k, 0) + v


def test_the_state_follows_the_task_from_worker_to_worker(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    a, b = worker(db), worker(db)
    batch(a, the=2, cow=1)
    batch(b, the=1)  # b runs the task next: it sees a's counts first
    assert dict(b.state) == {"the": 3, "cow": 1}
    batch(a, moon=1)  # and a, running it again, sees b's
    assert dict(a.state) == {"the": 3, "cow": 1, "moon": 1}
    assert a.catch_up() is False  # nothing new: the turn, no rows read


def test_a_restart_reads_the_state_back_and_tasks_are_apart(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    first, other_task = worker(db), worker(db, task=1)
    for _ in range(5):
        batch(first, n=1)
    batch(other_task, n=100)
    with first.turn() as state:
        del state["n"]
        state[("t", 2)] = [7]
    again = worker(db)
    again.catch_up()
    assert dict(again.state) == {("t", 2): [7]}
    task1 = worker(db, task=1)
    task1.catch_up()
    assert dict(task1.state) == {"n": 100}


def test_a_failed_turn_leaves_no_changes_and_the_worker_rereads(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    a, b = worker(db), worker(db)
    batch(a, n=1)
    with pytest.raises(RuntimeError), a.turn() as state:
        state["n"] = 100
        raise RuntimeError("the bolt's task raised")
    b.catch_up()
    assert dict(b.state) == {"n": 1}
    batch(a, n=1)  # a's half-done change was dropped: it starts again from the database
    assert dict(a.state) == {"n": 2}


def test_two_spark_tasks_running_the_task_at_once_take_turns(tmp_path: Path) -> None:
    """A fused chain runs a count task in every split task's partition, at the same time:
    the second waits for the first's turn to end, then sees its changes."""
    db = tmp_path / "state.db"
    a, b = worker(db), worker(db)
    in_b = threading.Event()

    def run_b() -> None:
        with b.turn() as state:
            in_b.set()
            state["n"] = state.get("n", 0) + 1

    with a.turn() as state:
        state["n"] = 1
        t = threading.Thread(target=run_b)
        t.start()
        assert not in_b.wait(0.3)  # b waits on the task's lock
    t.join(10)
    assert in_b.is_set() and dict(b.state) == {"n": 2}


def test_a_worker_that_ran_without_the_lock_cannot_write(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    a, zombie = worker(db), worker(db)
    batch(a, n=1)
    zombie.catch_up()
    batch(a, n=1)  # the task moves on while the zombie still runs its old turn
    zombie.state["n"] += 1
    with pytest.raises(StateError, match="another worker changed it since turn 1"):
        zombie.save()
    batch(zombie, n=1)  # it reads the state back: no count lost, none doubled
    assert dict(zombie.state) == {"n": 3}


def test_an_unsaveable_value_names_its_key(tmp_path: Path) -> None:
    w = worker(tmp_path / "state.db")
    with pytest.raises(StateError, match="'lock'"), w.turn() as state:
        state["lock"] = threading.Lock()
    batch(w, ok=1)
    w2 = worker(tmp_path / "state.db")
    w2.catch_up()
    assert dict(w2.state) == {"ok": 1}


def test_a_worker_catches_up_from_the_other_turns_log_not_from_the_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fused chain's heads take turns on a task every micro-batch: each applies the
    other's one log row instead of reading the whole state back."""
    db = tmp_path / "state.db"
    a, b = worker(db), worker(db)
    batch(a, the=1, cow=1)
    batch(b, the=1)

    def no_load() -> tuple[int, dict[str, int]]:
        raise AssertionError("the whole state was read back")

    monkeypatch.setattr(a.store, "load", no_load)
    with a.turn() as state:
        del state["cow"]
        state["moon"] = 1
    batch(b, moon=1)
    assert a.catch_up() is True and dict(a.state) == {"the": 2, "moon": 2}
    assert a.catch_up() is False


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2), st.dictionaries(
    st.sampled_from(["a", "b", "c", ("t", 1), 7]), st.one_of(st.none(), st.integers(0, 9)),
    max_size=4)), max_size=30))
def test_every_worker_sees_the_model_state_across_compactions(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        turns: list[tuple[int, dict[Any, int | None]]]) -> None:
    """Turns by any of three workers (None: delete the key), the log folded into the rows
    every third turn: each worker, caught up, holds exactly the model's state, as does a
    new worker reading it back."""
    monkeypatch.setattr(kv, "COMPACT_EVERY", 3)
    db = tmp_path_factory.mktemp("kv") / "state.db"
    workers = [worker(db) for _ in range(3)]
    model: dict[Any, int] = {}
    for who, changes in turns:
        with workers[who].turn() as state:
            assert dict(state) == model
            for k, v in changes.items():
                if v is None:
                    state.pop(k, None)
                    model.pop(k, None)
                else:
                    state[k] = model[k] = v
    for w in [*workers, worker(db)]:
        w.catch_up()
        assert dict(w.state) == model
    rows = workers[0].store.conn.execute("SELECT COUNT(*) FROM squall_kv_log").fetchone()[0]
    assert rows < 3


def test_a_state_reset_under_a_worker_is_read_back_not_kept(tmp_path: Path) -> None:
    """An operator empties the state (its turn back to 0): a worker ahead of that turn
    reads it back rather than keep, and later save, what it held."""
    w = worker(tmp_path / "state.db")
    batch(w, n=1)
    batch(w, n=1)
    for table in ("squall_kv", "squall_kv_log", "squall_kv_turns"):
        w.store.conn.execute(f"DELETE FROM {table}")
    batch(w, m=1)
    assert dict(w.state) == {"m": 1}
    fresh = worker(tmp_path / "state.db")
    fresh.catch_up()
    assert dict(fresh.state) == {"m": 1}


def test_a_state_kept_by_tasks_refuses_another_parallelism(tmp_path: Path) -> None:
    """Each task keeps its own keys: the state's number of tasks is recorded by the first
    to open it and any other number refused, naming both."""
    db = str(tmp_path / "state.db")
    for task in (0, 1, 1):
        open_kv(db, "wc-1-1.count", task, 2).close()
    open_kv(db, "wc-1-1.other", 0, 3).close()  # another state, its own number
    with pytest.raises(StateError, match=r"state 'wc-1-1.count' is kept by 2 tasks.* cannot "
                                         r"be split among 3: keep the bolt's parallelism at 2"):
        open_kv(db, "wc-1-1.count", 0, 3)
    s = TaskState(open_kv(db, "wc-1-1.count", 0, 2), KeyValueState())
    assert s.store.turn() == 0  # the record is not a task's turn
