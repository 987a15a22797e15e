"""Head tasks of a fused chain run at once, as Spark's tasks do, on the real broker and a
real SQLite state: both finish (a stateful bolt's task locks are taken in one order by
every head) and the fused stateful bolt's counts come out exact."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.bolts.tasks import run_chain
from squall.backends import open_kv
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.tuples import Tuple
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.topics import acker_topic, edge_topic
from squall.core.wire.tuple_batch import TupleBatch, encode_tuples
from squall.kafka import ensure_topics
from tests.integration.helpers import clients, edge_ranges

pytestmark = pytest.mark.integration

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away"] * 10
BATCHES = 12


def test_head_tasks_with_a_fused_stateful_bolt_run_at_once(bootstrap: str,
                                                           tmp_path: Path) -> None:
    name = f"fused{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences", 1)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", "examples.wordcount:WordCount", 2).fields_grouping("split", ["word"])
    spec = b.build(name, ackers=1)
    ensure_topics(clients(bootstrap), {acker_topic(name): 1, f"squall.{name}.dlq": 1,
                              edge_topic(name, "split", "default", "count"): 2}, 30)
    ids = [int(i) for i in IdBatcher(seed=3).ids(2 * len(SENTENCES))]
    rows: dict[int, Any] = {}
    for task in (1, 0):  # partition 1 first: the topic is made with both
        tuples = [Tuple([s], ("str",), {i + 1: i})
                  for s, i in zip(SENTENCES, ids[task::2], strict=True)]
        rows[task] = edge_ranges(bootstrap, f"edge-{name}",
                                 [encode_tuples(TupleBatch.from_tuples(tuples, ("str",)))],
                                 task=task)
    url = f"sqlite:///{tmp_path / 'state.db'}"
    executed = Counter[int]()
    errors: list[BaseException] = []

    def head(task: int) -> None:
        try:
            for batch_id in range(BATCHES):
                reports = run_chain(spec.to_json(), ("split", "count"), bootstrap,
                                    rows[task], {"count": url}, "", batch_id)
                executed[task] += reports[0].executed
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=head, args=(t,), daemon=True) for t in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "the head tasks are stuck (a deadlock)"
    assert not errors, errors
    assert executed == {0: BATCHES * len(SENTENCES), 1: BATCHES * len(SENTENCES)}
    counts: Counter[str] = Counter()
    for task in (0, 1):
        kv = open_kv(url, f"{name}.count", task)
        counts.update(kv.load()[1])
        kv.close()
    truth = Counter(w for s in SENTENCES for w in s.split())
    assert counts == {w: n * 2 * BATCHES for w, n in truth.items()}
