"""A persistent aggregate whose PostgreSQL goes down: the micro-batch waits for it, through
the bolts job's real sink, and applies once it is back: nothing failed, lost or applied
twice."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.bolts.tasks import run_chain
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.reliability.ids import IdBatcher
from squall.core.topology.topics import acker_topic
from squall.core.trident.codec import MapKind
from squall.dev import postgres
from squall.kafka import ensure_topics
from squall.processes import free_port
from tests.integration.helpers import clients, wait_for
from tests.integration.test_trident_bolts import FIELDS, ledger, rows

pytestmark = pytest.mark.integration


@pytest.fixture
def database(tmp_path: Path) -> Iterator[postgres.Server]:
    server = postgres.Server(tmp_path / "pg", free_port()).start()
    yield server
    server.stop(kill=True)
    server.remove()


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
    done: list[Any] = []
    caplog.set_level(logging.ERROR, logger="squall.bolts")
    batch = threading.Thread(target=lambda: done.append(persist(later, 2)), daemon=True)
    batch.start()
    wait_for(lambda: any("does not answer" in r.getMessage() for r in caplog.records), 60,
             "the task saying it waits for its database")
    assert batch.is_alive() and not done, "the batch ended while its database was down"
    database.start()
    batch.join(120)
    assert not batch.is_alive(), "the batch did not go on once its database was back"
    (rep,) = done
    assert (rep.executed, rep.acked, rep.failed) == (2, 2, 0)
    store = open_store(database.url, StoreName(f"{name}.balances", 0, MapKind.OPAQUE))
    try:
        assert {k[0]: v.curr for k, v in store.items()} == {"alice": 12, "bob": 5, "carol": 7}
    finally:
        store.close()
