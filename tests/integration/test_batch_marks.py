"""A micro-batch that Spark runs again after a crash is not run twice (on the real broker)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from services.bolts import batch_marks
from services.bolts.sink import run_chain
from squall.core.ids import IdBatcher
from squall.core.ledger import Ledger
from squall.core.records import AckerBatch, AckerRecord, Outcome, RecordKind
from squall.core.topics import acker_topic, edge_topic
from squall.core.topology import TopologyBuilder
from squall.core.tuple_batch import TupleBatch, encode_tuples
from squall.core.tuples import Tuple
from squall.core.wire import decode_acker_batch
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


def test_a_rerun_after_a_crash_while_producing_fails_its_roots_at_once(
        bootstrap: str, tmp_path: Path) -> None:
    """The first run's acks are in Kafka and this run's undo them (XOR): the trees are
    failed now, so the spout replays them instead of waiting for the message timeout."""
    name = f"resent{uuid.uuid4().hex[:6]}"
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences", 1)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 1,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", "examples.wordcount:WordCount", 1).fields_grouping("split", ["word"])
    spec = b.build(name, ackers=1)
    ensure_topics(bootstrap, {acker_topic(name): 1, f"squall.{name}.dlq": 1,
                              edge_topic(name, "split", "default", "count"): 1}, 30)
    ids = IdBatcher(seed=5).ids(2)
    roots = [int(i) + 1 for i in ids]
    tuples = [Tuple([s], ("str",), {r: int(i)}) for s, r, i in
              zip(["a b", "c d e"], roots, ids, strict=True)]
    row = edge_ranges(bootstrap, f"edge-{name}",
                      [encode_tuples(TupleBatch.from_tuples(tuples, ("str",)))])
    marks = str(tmp_path / "marks")

    def run(batch_id: int) -> int:
        (rep,) = run_chain(spec.to_json(), ("split",), bootstrap, [row], {}, marks, batch_id)
        return rep.executed

    assert run(3) == 2
    # The driver dies after the tasks' produce, before the batch is marked done.
    batch_marks.mark_done(marks, 0, 2)
    assert batch_marks.last_producing(marks, 0) == 3
    assert run(3) == 2
    assert run(3) == 0  # finished now: a third run is skipped
    got = [decode_acker_batch(m.value())
           for m in consume(bootstrap, acker_topic(name), 4, timeout_s=5)]
    assert len(got) == 3  # the acks twice, then the fails
    assert sorted(got[2].roots.tolist()) == sorted(roots)
    assert set(got[2].kinds.tolist()) == {RecordKind.FAIL}
    # The acker, with the spout's inits: both trees failed (replayed) at once.
    inits = AckerBatch.from_records(
        [AckerRecord(RecordKind.INIT, r, int(i), 0) for r, i in zip(roots, ids, strict=True)], 0)
    ledger = Ledger(timeout_ms=60_000)
    assert not len(ledger.apply(inits, 0))
    decided = [ledger.apply(a, 1) for a in got]
    assert not len(decided[0]) and not len(decided[1])  # the XOR alone never settles them
    assert sorted(decided[2].roots.tolist()) == sorted(roots)
    assert set(decided[2].outcomes.tolist()) == {Outcome.FAILED}
