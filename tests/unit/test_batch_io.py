"""A batch bolt over Arrow (``process_arrow``) and over pandas (``process``): the same
inputs, the same outputs, anchors and acks; the Arrow input table; malformed outputs
fail the micro-batch's inputs with a message that says what was wrong."""

from __future__ import annotations

import random
from typing import Any, ClassVar

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.wordcount import (
    SplitSentenceArrow,
    SplitSentenceBatch,
    WordCountArrow,
    WordCountBatch,
)
from squall.core.bolt_api.batch_io import arrow_native, input_table
from squall.core.bolt_api.bolt import PARENT, BatchBolt, TaskContext
from squall.core.reliability.clock import ManualClock
from squall.core.reliability.records import RecordKind
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.tasks.exec_result import ExecResult
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples

SPLIT_TO_COUNT = Edge("count", "squall.wc.edge.split.default.count", 3, Grouping.FIELDS,
                      ("word",))
COUNT_OUT = Edge("sink", "squall.wc.edge.count.default.sink", 1, Grouping.GLOBAL)


def _executor(bolt: Any, name: str, edges: list[Edge], seed: int) -> BoltExecutor:
    rng = random.Random(seed)
    return BoltExecutor(bolt, TaskContext("wc", name, 0, 1), edges, clock=ManualClock(),
                        ids=lambda: rng.getrandbits(63) + 1)


def _sentences(sentences: list[str], seed: int) -> TupleBatch:
    rng = random.Random(seed)
    anch = Anchoring(lambda: rng.getrandbits(63) + 1)
    tuples = [Tuple([s], ("str",), anch.spout_emit(0, 1).anchors[0]) for s in sentences]
    return TupleBatch.from_tuples(tuples, ("str",), source="sentences")


def _wire(batches: list[TupleBatch]) -> list[TupleBatch]:
    return [decode_tuples(encode_tuples(b)) for b in batches]


def _seen(res: ExecResult) -> tuple[Any, ...]:
    """What a run sent on: per partition the rows and their anchors' roots, and the acks'
    roots and kinds (edge ids are random; the trees' completion is checked against a
    ledger in tests/unit/test_executor.py)."""
    outs = sorted((part, b.data.drop_columns([c for c in b.data.schema.names
                                              if c.startswith("__")]).to_pylist(),
                   [sorted(t.anchors) for t in b.tuples()])
                  for _, part, b in res.outputs)
    acks = res.acks
    return (outs, acks.roots.tolist(), acks.kinds.tolist(),
            res.executed, res.emitted, res.acked, res.failed, res.errors)


words = st.sampled_from(["the", "cow", "a", "b", "ünï", "x" * 30])
spaces = st.sampled_from([" ", "  ", "\t", " \n "])
sentence = st.lists(st.tuples(words, spaces), max_size=8).map(
    lambda ws: "".join(w + s for w, s in ws)) | st.sampled_from(["", "   ", "one"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(sentence, min_size=1, max_size=12), min_size=1, max_size=3),
       st.integers(0, 2**31))
def test_the_arrow_word_count_emits_and_acks_as_the_pandas_one(
        messages: list[list[str]], seed: int) -> None:
    """Split then count, micro-batch after micro-batch (state carried): the same words on
    the same partitions with the same anchors, the same running counts, the same acks."""
    runs = []
    for split_cls, count_cls in ((SplitSentenceBatch, WordCountBatch),
                                 (SplitSentenceArrow, WordCountArrow)):
        split = _executor(split_cls(), "split", [SPLIT_TO_COUNT], seed)
        count = _executor(count_cls(), "count", [COUNT_OUT], seed + 1)
        seen = []
        for i, msg in enumerate(messages):
            res = split.run(_wire([_sentences(msg, seed + i)]))
            seen.append(_seen(res))
            counted = count.run(_wire([b for _, _, b in res.outputs]))
            seen.append(_seen(counted))
        runs.append((seen, count.state.changes() if count.state is not None else None))
    assert runs[0] == runs[1]


def test_the_input_table_has_every_message_s_rows_with_their_stream_and_source() -> None:
    a = TupleBatch.single_anchored({"word": pa.array(["x", "y"])}, None, None, source="s1")
    b = TupleBatch.single_anchored({"word": pa.array(["z"]), "n": pa.array([7])}, None, None,
                                   stream="other", source="s2")
    t = input_table([a, b])
    assert t.column("word").to_pylist() == ["x", "y", "z"]
    assert t.column("n").to_pylist() == [None, None, 7]
    assert pa.types.is_dictionary(t.column("__stream").type)
    assert t.column("__stream").to_pylist() == ["default", "default", "other"]
    assert t.column("__source").to_pylist() == ["s1", "s1", "s2"]


class _Bad(BatchBolt):
    outputs: ClassVar = {"default": ("word",)}

    def __init__(self, make: Any) -> None:
        self.make = make

    def process_arrow(self, table: pa.Table) -> pa.Table:
        return self.make(table)


def test_malformed_arrow_outputs_fail_the_inputs_and_say_why() -> None:
    cases = [
        (lambda t: t.to_pandas(), "not a pyarrow.Table"),
        (lambda t: pa.table({"word": ["a"]}), "__parent"),
        (lambda t: pa.table({"word": ["a"], PARENT: pa.array([None], pa.int64())}), "nulls"),
        (lambda t: pa.table({"word": ["a"], PARENT: [5]}), "outside 0..1"),
        (lambda t: pa.table({"other": ["a"], PARENT: [0]}), "lacks declared fields"),
    ]
    for make, said in cases:
        ex = _executor(_Bad(make), "bad", [SPLIT_TO_COUNT], 1)
        assert isinstance(ex.bolt, BatchBolt) and arrow_native(ex.bolt)
        res = ex.run(_wire([_sentences(["a b", "c"], 3)]))
        assert res.failed == 2 and res.acked == 0 and res.outputs == []
        assert set(res.acks.kinds.tolist()) == {RecordKind.FAIL}
        assert len(res.errors) == 1 and said in res.errors[0], (said, res.errors)


def test_a_pandas_bolt_is_not_called_over_arrow() -> None:
    assert not arrow_native(SplitSentenceBatch())
    assert arrow_native(SplitSentenceArrow())


def test_inputs_with_several_anchors_take_the_same_words_both_ways() -> None:
    """Tuples anchored to two trees go through the executor's per-tuple path (not the
    vectorized one): the Arrow bolt is called there too, with the same result."""
    rng = random.Random(9)
    anch = Anchoring(lambda: rng.getrandbits(63) + 1)
    tuples = []
    for s in ["the cow  jumped", "", "a b a"]:
        a, b = anch.spout_emit(0, 1), anch.spout_emit(0, 1)
        tuples.append(Tuple([s], ("str",), {**a.anchors[0], **b.anchors[0]}))
    batch = TupleBatch.from_tuples(tuples, ("str",), source="sentences")
    seen = []
    for cls in (SplitSentenceBatch, SplitSentenceArrow):
        res = _executor(cls(), "split", [SPLIT_TO_COUNT], 4).run(_wire([batch]))
        assert res.errors == [] and res.acked == 3
        seen.append(_seen(res))
    assert seen[0] == seen[1]
    words = sorted(w for _, rows, _ in seen[1][0] for w in (r["word"] for r in rows))
    assert words == sorted(["the", "cow", "jumped", "a", "b", "a"])
