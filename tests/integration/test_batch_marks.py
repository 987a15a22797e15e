"""A micro-batch that Spark runs again after a crash is not run twice (on the real broker)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from services.bolts import batch_marks
from services.bolts.tasks import run_chain
from squall.core.reliability.ids import IdBatcher
from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch, AckerRecord, Outcome, RecordKind
from squall.core.reliability.tuples import Tuple
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.topics import acker_topic, edge_topic
from squall.core.wire.internal import decode_acker_batch
from squall.core.wire.tuple_batch import TupleBatch, encode_tuples
from squall.kafka import ensure_topics
from tests.integration.helpers import clients, consume, edge_ranges

pytestmark = pytest.mark.integration


class SplitTask:
    """Task 0 of a split bolt over one edge record of two sentences (roots id + 1), run as
    Spark runs a micro-batch's task (``run(batch_id)``: how many tuples it executed)."""

    def __init__(self, bootstrap: str, tmp_path: Path, prefix: str, downstream: bool) -> None:
        name = f"{prefix}{uuid.uuid4().hex[:6]}"
        b = TopologyBuilder()
        b.set_spout("sentences", "sentences", 1)
        b.set_bolt("split", "examples.wordcount:SplitSentence", 1,
                   outputs={"default": ["word"]}).shuffle_grouping("sentences")
        topics = {acker_topic(name): 1, f"squall.{name}.dlq": 1}
        if downstream:  # the words' trees stay open until a count bolt acks them
            b.set_bolt("count", "examples.wordcount:WordCount", 1
                       ).fields_grouping("split", ["word"])
            topics[edge_topic(name, "split", "default", "count")] = 1
        self.spec, self.bootstrap, self.acker_topic = b.build(name, ackers=1), bootstrap, \
            acker_topic(name)
        ensure_topics(clients(bootstrap), topics, 30)
        self.ids = [int(i) for i in IdBatcher(seed=5).ids(2)]
        self.roots = [i + 1 for i in self.ids]
        tuples = [Tuple([s], ("str",), {r: i}) for s, r, i in
                  zip(["a b", "c d e"], self.roots, self.ids, strict=True)]
        self.row = edge_ranges(bootstrap, f"edge-{name}",
                               [encode_tuples(TupleBatch.from_tuples(tuples, ("str",)))])
        self.marks = str(tmp_path / "marks")

    def run(self, batch_id: int) -> int:
        (rep,) = run_chain(self.spec.to_json(), ("split",), self.bootstrap, self.row, {},
                           self.marks, batch_id)
        return rep.executed


def test_a_rerun_of_a_finished_batch_sends_nothing_again(bootstrap: str, tmp_path: Path) -> None:
    t = SplitTask(bootstrap, tmp_path, "marks", downstream=False)
    assert t.run(7) == 2
    assert t.run(7) == 0  # Spark's re-run of batch 7: skipped, nothing produced again
    assert t.run(8) == 2
    # Acks of batches 7 and 8 only: one message each.
    assert len(consume(bootstrap, t.acker_topic, 3, timeout_s=5)) == 2


def test_a_rerun_after_a_crash_while_producing_fails_its_roots_at_once(
        bootstrap: str, tmp_path: Path) -> None:
    """The first run's acks are in Kafka and this run's undo them (XOR): the trees are
    failed now, so the spout replays them instead of waiting for the message timeout."""
    t = SplitTask(bootstrap, tmp_path, "resent", downstream=True)
    assert t.run(3) == 2
    # The driver dies after the tasks' produce, before the batch is marked done.
    batch_marks.mark_done(t.marks, 0, 2)
    assert batch_marks.last_producing(t.marks, 0) == 3
    assert t.run(3) == 2
    assert t.run(3) == 0  # finished now: a third run is skipped
    got = [decode_acker_batch(m.value())
           for m in consume(bootstrap, t.acker_topic, 4, timeout_s=5)]
    assert len(got) == 3  # the acks twice, then the fails
    assert sorted(got[2].roots.tolist()) == sorted(t.roots)
    assert set(got[2].kinds.tolist()) == {RecordKind.FAIL}
    # The acker, with the spout's inits: both trees failed (replayed) at once.
    inits = AckerBatch.from_records(
        [AckerRecord(RecordKind.INIT, r, i, 0) for r, i in zip(t.roots, t.ids, strict=True)], 0)
    ledger = Ledger(timeout_ms=60_000)
    assert not len(ledger.apply(inits, 0))
    decided = [ledger.apply(a, 1) for a in got]
    assert not len(decided[0]) and not len(decided[1])  # the XOR alone never settles them
    assert sorted(decided[2].roots.tolist()) == sorted(t.roots)
    assert set(decided[2].outcomes.tolist()) == {Outcome.FAILED}
