"""A micro-batch that Spark runs again after a crash is not run twice (on the real broker)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from services.bolts.sink import run_chain
from squall.core.ids import IdBatcher
from squall.core.topics import acker_topic
from squall.core.topology import TopologyBuilder
from squall.core.tuple_batch import TupleBatch, encode_tuples
from squall.core.tuples import Tuple
from squall.kafka import ensure_topics
from tests.integration.helpers import consume, edge_ranges

pytestmark = pytest.mark.integration


def test_a_rerun_of_a_finished_batch_sends_nothing_again(bootstrap: str, tmp_path: Path) -> None:
    name = f"marks{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences", 1)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 1,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    spec = b.build(name, ackers=1)
    ensure_topics(bootstrap, {acker_topic(name): 1, f"squall.{name}.dlq": 1}, 30)
    ids = IdBatcher(seed=3).ids(2)
    tuples = [Tuple([s], ("str",), {int(i) + 1: int(i)}) for s, i in
              zip(["a b", "c d e"], ids, strict=True)]
    row = edge_ranges(bootstrap, f"edge-{name}",
                      [encode_tuples(TupleBatch.from_tuples(tuples, ("str",)))])
    marks = str(tmp_path / "marks")

    def run(batch_id: int) -> int:
        (rep,) = run_chain(spec.to_json(), ("split",), bootstrap, [row], {}, marks, batch_id)
        return rep.executed

    assert run(7) == 2
    assert run(7) == 0  # Spark's re-run of batch 7: skipped, nothing produced again
    assert run(8) == 2
    # Acks of batches 7 and 8 only: one message each.
    assert len(consume(bootstrap, acker_topic(name), 3, timeout_s=5)) == 2
