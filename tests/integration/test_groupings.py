"""Local-or-shuffle, partial key and custom groupings on the real stack: the example
topology (examples/groupings.py) counting a skewed stream exactly."""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from examples.groupings import topology
from squall.backends import open_store
from squall.backends.sql import StoreName
from squall.core.topology.routing import fields_hash, second_hash
from squall.core.trident.codec import MapKind
from squall.kafka import ensure_topics
from tests.integration.helpers import (
    clients,
    committed_offsets,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)

pytestmark = pytest.mark.integration
PARTS = 2
TAG_TASKS = 4
#: The hot word: one whose two candidate tasks differ (partial key grouping can split it).
HOT = next(w for w in ("the", "a", "of", "and", "to", "in")
           if fields_hash([w]) % TAG_TASKS != second_hash([w]) % TAG_TASKS)


def state(url: str, table: str) -> dict[tuple[object, ...], int]:
    store = open_store(url, StoreName(table, 0, MapKind.OPAQUE))
    try:
        return {tuple(k): int(v.curr) for k, v in store.items()}
    finally:
        store.close()


def test_a_hot_key_is_spread_over_two_tasks_and_counted_exactly(bootstrap: str,
                                                                  tmp_path: Path) -> None:
    name = f"gr{uuid.uuid4().hex[:6]}"
    source = f"src-{name}"
    spec = topology(name, source)
    assert spec.component("tag").parallelism == TAG_TASKS
    ensure_topics(clients(bootstrap), {source: PARTS})
    url = f"sqlite://{tmp_path / 'state.db'}"
    # Skewed: the hot word is half of all words.
    lines = [f"{HOT} cat {HOT} {i % 13} {HOT} dog{i % 5}".encode() for i in range(600)]
    truth = Counter(w for s in lines for w in s.decode().split())

    acker, spout, bolts = topology_services(spec, bootstrap, tmp_path, state_url=url)

    def committed() -> int:
        return sum(max(o, 0) for o in committed_offsets(
            bootstrap, f"squall.{name}.sentences", source, PARTS))

    with acker.start(), bolts.start():
        wait_for_queries(bolts)
        produce_source(bootstrap, source, lines, PARTS)
        with spout.start() as sp:
            wait_for(lambda: committed() >= len(lines) or not bolts.alive(), 300,
                     "every sentence committed", every_s=0.5,
                     explain=lambda: bolts.log_tail(60))
            m = sp.metrics()
    assert m.get(f"squall_spout_failed_total{{component=sentences,reason=timeout,"
                 f"topology={name}}}", 0.0) == 0, "trees timed out"

    counts = {str(k[0]): v for k, v in state(url, f"{name}.count").items()}
    assert counts == dict(truth)
    spread: dict[str, set[int]] = defaultdict(set)
    merged: Counter[str] = Counter()
    for (word, task), n in state(url, f"{name}.where").items():
        spread[str(word)].add(int(str(task)))
        merged[str(word)] += n
    assert merged == truth
    # the hot word on two tasks of tag; no word on more than two
    assert len(spread[HOT]) == 2, dict(spread)
    assert all(len(t) <= 2 for t in spread.values()), dict(spread)
