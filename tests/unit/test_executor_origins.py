"""Each tuple carries the source message it descends from (what exact state keys on), from
its input to each child, through both executor paths and across the wire."""

from __future__ import annotations

import pytest

from examples.wordcount import SplitSentence, SplitSentenceArrow, SplitSentenceBatch
from squall.core.wire.tuple_batch import TupleBatch
from tests.unit.test_executor import SPLIT_TO_COUNT, Harness, ctx, make_executor, through


@pytest.mark.parametrize("split_cls", [SplitSentence, SplitSentenceBatch, SplitSentenceArrow])
def test_every_word_carries_its_sentence_s_source_message(split_cls: type) -> None:
    """Exact state keys on the source message a tuple descends from: both executor paths
    pass it from the input to each child, across the wire."""
    h = Harness()
    split = make_executor(split_cls(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    sentences = ["the cow jumped", "an apple", "the end"]
    _, batch = h.spout(sentences)
    offsets = [40, 41, 7]
    names = ["sentences:0", "sentences:0", "sentences:1"]
    tuples = batch.tuples()
    for t, name, off in zip(tuples, names, offsets, strict=True):
        t.origin = (name, off)
    batch = TupleBatch.from_tuples(tuples, ("str",), source="sentences")
    out = split.run(through([batch]))
    seen: dict[str, tuple[str, int]] = {}
    for b in through([o for _, _, o in out.outputs]):
        for t in b.tuples():
            assert t.origin is not None
            seen[t["word"]] = t.origin
    for sentence, name, off in zip(sentences, names, offsets, strict=True):
        for w in sentence.split():
            if w != "the":
                assert seen[w] == (name, off), w


def test_tuples_without_origins_emit_children_without_them() -> None:
    h = Harness()
    split = make_executor(SplitSentenceBatch(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    _, batch = h.spout(["a b"])
    out = split.run(through([batch]))
    assert all(o.origins() is None for _, _, o in out.outputs)
