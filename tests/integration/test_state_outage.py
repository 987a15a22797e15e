"""Bolts whose PostgreSQL goes down, through the bolts job's real sink: a persistent
aggregate's micro-batch waits for it and applies once it is back; a stateful bolt's turn
fails its Spark task and the next attempt waits. Nothing failed, lost or applied twice."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from services.bolts.tasks import run_chain
from squall.backends import open_kv, open_store, unavailable
from squall.backends.sql import StoreName
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.tuples import Tuple
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.topics import acker_topic
from squall.core.trident.codec import MapKind
from squall.core.wire.tuple_batch import TupleBatch, encode_tuples
from squall.dev import postgres
from squall.kafka import ensure_topics
from squall.processes import free_port
from tests.integration.helpers import clients, edge_ranges, wait_for
from tests.integration.test_trident_bolts import FIELDS, ledger, rows

pytestmark = pytest.mark.integration


@pytest.fixture
def database(tmp_path: Path) -> Iterator[postgres.Server]:
    server = postgres.Server(tmp_path / "pg", free_port()).start()
    yield server
    server.stop(kill=True)
    server.remove()


def _waits_for(database: postgres.Server, caplog: pytest.LogCaptureFixture,
               run: Callable[[], Any], said: str) -> Any:
    """``run()`` on a thread while ``database`` is down: it says ``said`` and does not end;
    once the database is started again it ends; what it returned."""
    done: list[Any] = []
    caplog.set_level(logging.ERROR, logger="squall.bolts")
    batch = threading.Thread(target=lambda: done.append(run()), daemon=True)
    batch.start()
    wait_for(lambda: any(said in r.getMessage() for r in caplog.records), 60,
             f"the task saying {said!r}")
    assert batch.is_alive() and not done, "the batch ended while its database was down"
    database.start()
    batch.join(120)
    assert not batch.is_alive(), "the batch did not go on once its database was back"
    return done[0]


def test_an_aggregate_waits_for_its_database_and_applies_once_it_is_back(
        bootstrap: str, database: postgres.Server, caplog: pytest.LogCaptureFixture) -> None:
    name = f"out{uuid.uuid4().hex[:6]}"
    spec = ledger(name, MapKind.OPAQUE)
    ensure_topics(clients(bootstrap), {acker_topic(name): 1, f"squall.{name}.dlq": 1}, 30)
    ids = IdBatcher(seed=7)
    urls = {"balances": database.url}

    def persist(rec: Any, txid: int) -> Any:
        return run_chain(spec.to_json(), ("balances",), bootstrap, rec, urls, "", txid)[0]

    assert persist(rows(bootstrap, FIELDS, [("alice", 10), ("bob", 5)], 0, ids), 1).executed == 2
    later = rows(bootstrap, FIELDS, [("alice", 2), ("carol", 7)], 2, ids)
    database.stop()
    rep = _waits_for(database, caplog, lambda: persist(later, 2), "does not answer")
    assert (rep.executed, rep.acked, rep.failed) == (2, 2, 0)
    store = open_store(database.url, StoreName(f"{name}.balances", 0, MapKind.OPAQUE))
    try:
        assert {k[0]: v.curr for k, v in store.items()} == {"alice": 12, "bob": 5, "carol": 7}
    finally:
        store.close()


def test_a_stateful_bolts_next_attempt_waits_for_its_database_and_counts_once(
        bootstrap: str, database: postgres.Server, caplog: pytest.LogCaptureFixture) -> None:
    """A turn whose database went away fails its Spark task (nothing of it written or
    sent); the attempt Spark runs next waits until the database answers, then counts."""
    name = f"kvo{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("words", "words", 1, fields=["word"])
    b.set_bolt("count", "examples.wordcount:WordCount", 1).shuffle_grouping("words")
    spec = b.build(name, ackers=1)
    ensure_topics(clients(bootstrap), {acker_topic(name): 1, f"squall.{name}.dlq": 1}, 30)
    ids = IdBatcher(seed=9)

    def words(ws: list[str]) -> Any:
        tuples = [Tuple([w], ("word",), {int(a) | 1: int(a)})
                  for w, a in zip(ws, ids.ids(len(ws)), strict=True)]
        return edge_ranges(bootstrap, f"edge-{name}",
                           [encode_tuples(TupleBatch.from_tuples(tuples, ("word",)))])

    def count(rec: Any, batch: int) -> Any:
        return run_chain(spec.to_json(), ("count",), bootstrap, rec, {"count": database.url},
                         "", batch)[0]

    assert count(words(["a", "b", "a"]), 0).executed == 3
    later = words(["a", "c"])
    database.stop()
    with pytest.raises(Exception) as first:
        count(later, 1)
    assert unavailable(first.value), first.value
    assert _waits_for(database, caplog, lambda: count(later, 1), "waiting for it").executed == 2
    kv = open_kv(database.url, f"{name}.count", 0)
    try:
        assert kv.load()[1] == {"a": 3, "b": 1, "c": 1}
    finally:
        kv.close()
