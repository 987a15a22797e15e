"""partition_persist and state_query through the bolts job's real sink (the code Spark's
Python workers run), on the real broker and real databases: a StateUpdater's balances
exact through a Storm-level replay and a Spark-level re-run, then looked up from a stream,
each answer anchored to its lookup."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from services.bolts.tasks import run_chain
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.tuples import Tuple
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import acker_topic, edge_topic
from squall.core.trident.codec import MapKind
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples
from squall.kafka import ensure_topics
from tests.integration.helpers import clients, consume, edge_ranges

pytestmark = pytest.mark.integration
FIELDS = ("account", "amount")


def ledger(name: str, kind: MapKind) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("payments", "payments", scheme="json", fields=["account", "amount"])
    b.set_spout("lookups", "lookups", scheme="json", fields=["account"])
    b.partition_persist("balances", "examples.ledger:AddToBalance", ["account"],
                        ["account", "amount"], ["account", "balance"], 2, kind=kind.value
                        ).fields_grouping("payments", ["account"])
    b.state_query("lookup", "balances", ["account"], output="balance"
                  ).shuffle_grouping("lookups")
    b.set_bolt("answers", "examples.wordcount:SplitSentence", 1,
               outputs={"default": ["word"]}).shuffle_grouping("lookup")
    return b.build(name, ackers=1)


def rows(bootstrap: str, fields: tuple[str, ...], values: list[tuple[Any, ...]],
         first_offset: int, ids: IdBatcher) -> Any:
    """One edge record of tuples, each from its own source message (payments:0, offset)."""
    anchors = ids.ids(len(values))
    tuples = [Tuple(list(v), fields, {int(a) | 1: int(a)}, origin=("payments:0", first_offset + i))
              for i, (v, a) in enumerate(zip(values, anchors, strict=True))]
    return edge_ranges(bootstrap, f"edge-{uuid.uuid4().hex[:8]}",
                       [encode_tuples(TupleBatch.from_tuples(tuples, fields))])


@pytest.mark.parametrize(("db", "kind"), [("sqlite", MapKind.OPAQUE),
                                          ("postgresql", MapKind.TRANSACTIONAL)])
def test_balances_are_exact_and_lookups_answer_from_the_state(
        request: pytest.FixtureRequest, bootstrap: str, tmp_path: Path, db: str,
        kind: MapKind) -> None:
    url = f"sqlite://{tmp_path / 'state.db'}" if db == "sqlite" else \
        str(request.getfixturevalue("postgres_url"))
    name = f"led{uuid.uuid4().hex[:6]}"
    spec = ledger(name, kind)
    answers = edge_topic(name, "lookup", "default", "answers")
    ensure_topics(clients(bootstrap), {acker_topic(name): 1, f"squall.{name}.dlq": 1, answers: 1},
                  30)
    ids = IdBatcher(seed=5)
    urls = {"balances": url, "lookup": url}
    persist: Callable[[Any, int], Any] = lambda rec, txid: run_chain(  # noqa: E731
        spec.to_json(), ("balances",), bootstrap, rec, urls, "", txid)[0]

    first = rows(bootstrap, FIELDS, [("alice", 10), ("bob", 5), ("alice", 2)], 0, ids)
    assert persist(first, 1).executed == 3
    assert persist(first, 1).executed == 3  # Spark runs batch 1 again: its records skip it
    # Storm-level: messages 1 and 2 replayed under new roots, with a new message 3.
    again = rows(bootstrap, FIELDS, [("bob", 5), ("alice", 2), ("carol", 7)], 1, ids)
    assert persist(again, 2).executed == 3
    store = open_store(url, StoreName(f"{name}.balances", 0, kind))
    stored = {k[0]: v for k, v in store.items()}
    store.close()
    assert {a: v.val if kind is MapKind.TRANSACTIONAL else v.curr for a, v in stored.items()
            } == {"alice": 12, "bob": 5, "carol": 7}

    lookups = [Tuple([a], ("account",), {int(x) | 1: int(x)}) for a, x in
               zip(["alice", "dave", "carol"], ids.ids(3), strict=True)]
    rec = edge_ranges(bootstrap, f"edge-{name}", [encode_tuples(TupleBatch.from_tuples(
        lookups, ("account",)))])
    (rep,) = run_chain(spec.to_json(), ("lookup",), bootstrap, rec, urls, "", 1)
    assert (rep.executed, rep.emitted, rep.acked, rep.failed) == (3, 3, 3, 0)
    (raw,) = consume(bootstrap, answers, 1)
    out = decode_tuples(raw.value()).tuples()
    assert [t.values for t in out] == [("alice", 12), ("dave", None), ("carol", 7)]
    # Each answer is anchored to its lookup's root: the lookup's tree includes it.
    assert [set(t.anchors) for t in out] == [set(t.anchors) for t in lookups]
