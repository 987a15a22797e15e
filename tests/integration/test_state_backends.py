"""Trident state on real databases (SQLite, PostgreSQL): exact counts, atomic batches, and a
crash mid-batch."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from squall.backends import open_store, purge
from squall.backends.sql import SqlStore, StoreName
from squall.core.errors import StateError
from squall.core.trident.aggregators import Count
from squall.core.trident.codec import MapKind
from squall.core.trident.maps import NonTransactionalMap, OpaqueMap, TransactionalMap
from squall.core.trident.persist import BatchInput, PersistentAggregate

MAPS: dict[MapKind, Callable[[Any], Any]] = {
    MapKind.TRANSACTIONAL: TransactionalMap, MapKind.OPAQUE: OpaqueMap,
    MapKind.NON_TRANSACTIONAL: NonTransactionalMap}


def _batch(words: list[str], offsets: list[int], records: list[int] | None = None
           ) -> BatchInput:
    return BatchInput([(w,) for w in words], [(w,) for w in words], ["sentences:0"] * len(words),
                      np.array(offsets, np.int64),
                      np.array(records or [0] * len(offsets), np.int64))


def _counts(store: SqlStore, kind: MapKind, words: list[str]) -> list[Any]:
    m = MAPS[kind](store)
    return list(m.multi_get([(w,) for w in words]))


Open = Callable[[StoreName], SqlStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL; each test's states get a fresh name, so PostgreSQL is shared."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'state.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def state(request: pytest.FixtureRequest) -> str:
    return f"counts_{abs(hash(request.node.nodeid)) % 10**9}"


@pytest.mark.parametrize("kind", [MapKind.TRANSACTIONAL, MapKind.OPAQUE])
def test_replays_of_both_kinds_count_once(db: str, state: str, kind: MapKind) -> None:
    store = open_store(db, StoreName(state, 0, kind))
    agg = PersistentAggregate(MAPS[kind](store), store, Count())
    agg.run(1, _batch(["a", "b", "a"], [0, 0, 1]))
    agg.run(1, _batch(["a", "b", "a"], [0, 0, 1]))  # Spark runs batch 1 again
    agg.run(2, _batch(["a", "c"], [1, 2], records=[0, 1]))  # message 1 replayed by the spout
    store.close()
    again = open_store(db, StoreName(state, 0, kind))  # another worker, another connection
    assert _counts(again, kind, ["a", "b", "c", "z"]) == [2, 1, 1, None]
    assert [r.txid for r in again.load_applied()] == [1, 2]


def test_a_purge_deletes_the_states_of_one_topology_id_and_no_other(db: str,
                                                                     state: str) -> None:
    """``squall kill --purge-state``: the bolts worker purges ``<id>.*``; a state of an
    id that starts the same, or named in a spec, stays."""
    kind = MapKind.OPAQUE
    tid = f"{state}-3-1795798502"
    names = [f"{tid}.count", f"{tid}.sums", f"{tid}0.count", state]
    for name in names:
        store = open_store(db, StoreName(name, 0, kind))
        PersistentAggregate(MAPS[kind](store), store, Count()).run(1, _batch(["a", "b"], [0, 1]))
        store.close()
    assert purge(db, tid) > 0
    left = []
    for name in names:
        store = open_store(db, StoreName(name, 0, kind))
        left.append(_counts(store, kind, ["a"]) == [1] and bool(store.load_applied()))
        store.close()
    assert left == [False, False, True, True]
    assert purge(db, tid) == 0  # again: nothing left of it


def test_non_transactional_state_is_at_least_once(db: str, state: str) -> None:
    kind = MapKind.NON_TRANSACTIONAL
    store = open_store(db, StoreName(state, 0, kind))
    agg = PersistentAggregate(MAPS[kind](store), store, Count())
    agg.run(1, _batch(["a"], [0]))
    agg.run(1, _batch(["a"], [0]))
    assert _counts(store, kind, ["a"]) == [2]
    assert store.load_applied() == []


def test_a_failed_batch_leaves_nothing_and_the_records_prune(db: str, state: str) -> None:
    kind = MapKind.TRANSACTIONAL
    store = open_store(db, StoreName(state, 0, kind))
    agg = PersistentAggregate(MAPS[kind](store), store, Count())
    agg.run(1, _batch(["a"], [0]))
    bad = _batch(["b", "c"], [1, 2])
    with pytest.raises(StateError, match="not JSON"):
        PersistentAggregate(MAPS[kind](store), store, _Unstorable()).run(2, bad)
    assert _counts(store, kind, ["a", "b"]) == [1, None]
    agg.run(2, _batch(["b"], [1]), committed={"sentences:0": 1})  # message 0 committed
    assert [r.txid for r in store.load_applied()] == [2]


class _Unstorable(Count):
    def init(self, values: Any) -> Any:
        return object()


def test_tasks_of_one_state_share_a_database_and_keep_their_own_records(db: str,
                                                                       state: str) -> None:
    kind = MapKind.OPAQUE
    stores = [open_store(db, StoreName(state, t, kind)) for t in (0, 1)]
    for t, s in enumerate(stores):
        PersistentAggregate(OpaqueMap(s), s, Count()).run(1, _batch([f"w{t}"], [t]))
    assert _counts(stores[0], kind, ["w0", "w1"]) == [1, 1]
    assert [list(r.offsets["sentences:0"]) for r in stores[1].load_applied()] == [[1]]


def test_a_process_killed_between_the_state_write_and_the_commit_leaves_nothing(
        db: str, state: str) -> None:
    """The bolts job dies after writing a batch's values and records, before the commit:
    the database has none of it, and the re-run counts it once."""
    script = textwrap.dedent(f"""
        import os, numpy as np
        from squall.backends import open_store
        from squall.backends.sql import StoreName
        from squall.core.trident.aggregators import Count
        from squall.core.trident.codec import MapKind
        from squall.core.trident.maps import TransactionalMap
        from squall.core.trident.persist import BatchInput, PersistentAggregate
        store = open_store({db!r}, StoreName({state!r}, 0, MapKind.TRANSACTIONAL))
        m = TransactionalMap(store)
        def die(conn): os._exit(9)   # killed before the commit, its change record written
        store.d.commit = die
        PersistentAggregate(m, store, Count()).run(
            1, BatchInput([("a",)], [("a",)], ["sentences:0"], np.array([0], np.int64),
                          np.array([0], np.int64)))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 9, done.stderr
    store = open_store(db, StoreName(state, 0, MapKind.TRANSACTIONAL))
    assert _counts(store, MapKind.TRANSACTIONAL, ["a"]) == [None]
    assert store.load_applied() == []
    agg = PersistentAggregate(TransactionalMap(store), store, Count())
    agg.run(1, _batch(["a"], [0]))
    assert _counts(store, MapKind.TRANSACTIONAL, ["a"]) == [1]


def test_an_unreadable_database_is_a_clear_error(tmp_path: Path, postgres_url: str) -> None:
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StateError, match="cannot open the SQLite state"):
        open_store(str(bad), StoreName("counts", 0, MapKind.OPAQUE))
    wrong = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    with pytest.raises(StateError, match="no_such_database"):
        open_store(wrong, StoreName("counts", 0, MapKind.OPAQUE))


def test_a_stateful_bolts_state_in_postgresql(postgres_url: str) -> None:
    """Storm's KeyValueState of a task on PostgreSQL: pickled keys and values as bytea,
    read back by another worker, a zombie's write refused."""
    from services.bolts.task_state import TaskState
    from squall.backends import open_kv
    from squall.core.bolt_api.state import KeyValueState

    def worker() -> TaskState:
        return TaskState(open_kv(postgres_url, "kv.test.count", 3), KeyValueState())

    a, b = worker(), worker()
    with a.turn() as s:
        s[("the", 1)] = {"n": 2, "raw": b"\x00\xff"}
        s["gone"] = 1
    with b.turn() as s:
        assert s[("the", 1)] == {"n": 2, "raw": b"\x00\xff"}
        del s["gone"]
    assert a.catch_up() and dict(a.state) == {("the", 1): {"n": 2, "raw": b"\x00\xff"}}
    with b.turn() as s:
        s["y"] = 2
    a.state["x"] = 1  # a worker that ran the task without its lock
    with pytest.raises(StateError, match="another worker changed it"):
        a.save()
    c = worker()
    c.catch_up()
    assert set(c.state) == {("the", 1), "y"}


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_user_defined_backend_counts_exactly_in_its_own_table(
        request: pytest.FixtureRequest, tmp_path: Path, db: str) -> None:
    """examples/counts_table.py: a backing map of the user's own shape, with Squall's
    applied records in the same transaction."""
    from squall.backends import open_state
    from squall.core.topology.trident import StateOptions

    url = f"sqlite://{tmp_path / 'state.db'}" if db == "sqlite" else \
        str(request.getfixturevalue("postgres_url"))
    name = f"wc{uuid.uuid4().hex[:6]}.count"
    options = StateOptions(MapKind.OPAQUE, name=name,
                           backend="examples.counts_table:WordCountsTable")
    store = open_state(options, url, 0)
    agg = PersistentAggregate(OpaqueMap(store), store, Count())
    agg.run(1, _batch(["a", "b", "a"], [0, 1, 2]))
    agg.run(2, _batch(["b", "a", "c"], [1, 2, 3], [1, 1, 1]))  # 1, 2 replayed (Storm)
    agg.run(2, _batch(["b", "a", "c"], [1, 2, 3], [1, 1, 1]))  # batch 2 again (Spark)
    rows = store.conn.execute("SELECT word, curr FROM word_counts WHERE state = "
                              f"{store.d.p} ORDER BY word", (name,)).fetchall()
    assert [tuple(r) for r in rows] == [("a", 2), ("b", 1), ("c", 1)]
    store.close()
    with pytest.raises(StateError, match="word_counts keeps opaque values, not transactional"):
        open_state(StateOptions(MapKind.TRANSACTIONAL, name=name,
                                backend="examples.counts_table:WordCountsTable"), url, 0)
    with pytest.raises(StateError, match=r"state backend 'examples\.counts_table:Nope' failed"):
        open_state(StateOptions(name=name, backend="examples.counts_table:Nope"), url, 0)


def test_the_change_log_compacts_into_the_table_and_every_store_reads_the_newest(
        db: str, state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks of one state write the log; a compaction folds it into the table and
    deletes its records; a third store that read the log before the compaction (so knows
    stale values) and a fresh one both read the newest values, as does ``items()``."""
    from squall.core.trident import change_log

    monkeypatch.setattr(change_log, "MIN_ENTRIES", 8)
    monkeypatch.setattr(change_log, "RATIO", 2)
    kind = MapKind.OPAQUE
    writers = [open_store(db, StoreName(state, t, kind)) for t in (0, 1)]
    reader = open_store(db, StoreName(state, 9, kind))
    aggs = [PersistentAggregate(OpaqueMap(s), s, Count()) for s in writers]
    truth: dict[str, int] = {}
    for txid in range(1, 4):
        for t, agg in enumerate(aggs):
            words = [f"t{t}w{i % 2}" for i in range(3)]
            agg.run(txid, _batch(words, [100 * txid + 10 * t + i for i in range(3)]))
            for w in words:
                truth[w] = truth.get(w, 0) + 1
        if txid == 1:
            assert _counts(reader, kind, list(truth)) == list(truth.values())
    # 12 entries over 4 keys: compacted by now, its records gone
    rows = writers[0].conn.execute("SELECT count(*) FROM squall_changes WHERE state = "
                                   f"{writers[0].d.p}", (state,)).fetchone()[0]
    table = dict(writers[0].conn.execute(f"SELECT key, value FROM squall_state WHERE state = "
                                         f"{writers[0].d.p}", (state,)).fetchall())
    assert rows < 6 and table, (rows, table)
    fresh = open_store(db, StoreName(state, 8, kind))
    for s in (reader, fresh, *writers):
        assert _counts(s, kind, list(truth)) == list(truth.values())
        assert {w: v.curr for (w,), v in s.items()} == truth


def _writer_lock_free(db_path: Path) -> bool:
    import fcntl

    with open(db_path.parent / f"{db_path.name}.locks" / "writer.lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_sqlite_writers_take_turns_on_a_file_lock_let_go_at_the_end_of_each_batch(
        tmp_path: Path, state: str) -> None:
    """SQLite's own wait for its write lock sleeps in steps of up to 100 ms; writers queue
    on a file lock instead, held from the batch's begin to its commit or rollback, failed
    batches included, and never by a reader."""
    import threading

    path = tmp_path / "state.db"
    kind = MapKind.OPAQUE
    a, b = (open_store(f"sqlite://{path}", StoreName(state, t, kind)) for t in (0, 1))
    ma, mb = OpaqueMap(a), OpaqueMap(b)
    ma.begin_commit(1)
    assert not _writer_lock_free(path)
    began = threading.Event()

    def second_writer() -> None:
        mb.begin_commit(1)
        began.set()
        mb.commit(1)

    t = threading.Thread(target=second_writer)
    t.start()
    assert not began.wait(0.3)  # queued behind the first writer's batch
    ma.multi_put([("w",)], [1])
    ma.commit(1)
    assert began.wait(30)
    t.join(30)
    assert _writer_lock_free(path)
    assert _counts(b, kind, ["w"]) == [1]  # a reader takes no writer's lock
    assert _writer_lock_free(path)
    with pytest.raises(StateError, match="not JSON"):  # a failed batch lets it go too
        PersistentAggregate(OpaqueMap(a), a, _Unstorable()).run(2, _batch(["x"], [5]))
    assert _writer_lock_free(path)
    a.begin_commit(3)
    a.rollback(3)
    assert _writer_lock_free(path)


def test_a_database_in_sql_ascii_reads_back_text(postgres_url: str) -> None:
    """A database created without a UTF-8 locale (initdb in a bare container says SQL_ASCII)
    hands text back as bytes unless the client names its encoding: the state reads its own
    marks, records and keys back, a non-ASCII key included."""
    import psycopg

    name = f"ascii_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} ENCODING 'SQL_ASCII' LC_COLLATE 'C' "
                      "LC_CTYPE 'C' TEMPLATE template0")
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    store = open_store(url, StoreName("ascii", 0, MapKind.OPAQUE))
    agg = PersistentAggregate(OpaqueMap(store), store, Count())
    agg.run(1, _batch(["wörd", "b", "wörd"], [0, 0, 1]))
    agg.run(2, _batch(["b"], [2]))
    store.close()
    again = open_store(url, StoreName("ascii", 0, MapKind.OPAQUE))
    assert _counts(again, MapKind.OPAQUE, ["wörd", "b"]) == [2, 2]
    assert again.load_task().txid == 2
    assert {w for (w,), _ in again.items()} == {"wörd", "b"}
    again.close()
