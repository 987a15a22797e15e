"""Each tuple carries the source message it descends from (what exact state keys on), from
its input to each child, through both executor paths and across the wire."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.wordcount import SplitSentence, SplitSentenceArrow, SplitSentenceBatch
from squall.bolt import TaskContext
from squall.core.errors import WireFormatError
from squall.core.reliability.lineage import child_path, child_paths, occurrence
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.tasks.exec_result import ExecResult
from squall.core.wire.tuple_batch import (
    BY_COL,
    NTH_COL,
    TupleBatch,
    decode_tuples,
    encode_tuples,
)
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
    tuples = [Tuple(t.values, t.fields, t.anchors, origin=(name, off))
              for t, name, off in zip(batch.tuples(), names, offsets, strict=True)]
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


def _sentences_with_origins(h: Harness, sentences: list[str]) -> TupleBatch:
    _, batch = h.spout(sentences)
    tuples = [Tuple(t.values, t.fields, t.anchors, origin=("sentences:0", 100 + i))
              for i, t in enumerate(batch.tuples())]
    return TupleBatch.from_tuples(tuples, ("str",), source="sentences")


def _lineage_by_word(out: ExecResult) -> dict[tuple[int, str], tuple[int, int]]:
    """(offset, word) -> (emitted_by, path); words are distinct within a sentence here."""
    got = {}
    for b in through([o for _, _, o in out.outputs]):
        for t in b.tuples():
            assert t.origin is not None
            got[(t.origin[1], t["word"])] = (t.emitted_by, t.path)
    return got


def test_each_child_has_the_path_of_its_place_in_its_message_s_tree_on_both_paths() -> None:
    """The k-th word of a sentence (a spout tuple: path 0) has path child_path(0, k), on the
    per-tuple path and the vectorized one alike, so either API's output reaches exact state
    with the same units; the grandchildren follow (emitted_by = the word's path)."""
    sentences = ["the cow jumped", "an apple pie", "end"]
    want = {(100 + i, w): (0, child_path(0, k))
            for i, s in enumerate(sentences) for k, w in enumerate(s.split())}
    for cls in (SplitSentence, SplitSentenceBatch, SplitSentenceArrow):
        h = Harness()
        split = make_executor(cls(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
        got = _lineage_by_word(split.run(through([_sentences_with_origins(h, sentences)])))
        assert got == want, cls.__name__
    # one hop further: each word's one child is emitted by the word's path
    h = Harness()
    split = make_executor(SplitSentence(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    words = [o for _, _, o in split.run(through([_sentences_with_origins(h, sentences)])
                                        ).outputs]
    echo = make_executor(SplitSentence(), ctx("echo"), [SPLIT_TO_COUNT], ids=h.ids)
    again = _lineage_by_word(echo.run(through(words)))
    assert again == {k: (p, child_path(p, 0)) for k, (_, p) in want.items()}


def test_a_replayed_input_gives_its_children_the_same_paths() -> None:
    """A replay runs the same input again (under a new root, maybe on another task):
    deterministic bolts give the same paths, which is what lets exact state skip it."""
    sentences = ["a b c", "d e"]
    runs = []
    for task in (0, 1):
        h = Harness(seed=task)  # other roots and edge ids
        split = make_executor(SplitSentence(), TaskContext("wc", "split", task, 2),
                              [SPLIT_TO_COUNT], ids=h.ids)
        runs.append(_lineage_by_word(split.run(through([_sentences_with_origins(
            h, sentences)]))))
    assert runs[0] == runs[1]


def test_lineage_crosses_the_wire_and_bad_lineage_columns_are_refused() -> None:
    h = Harness()
    batch = _sentences_with_origins(h, ["x y", "z"])
    first, second = (Tuple(t.values, t.fields, t.anchors, origin=t.origin, emitted_by=by,
                           nth=nth)
                     # the second: a first bolt's output, emitted_by 0, no __by column needed
                     for t, (by, nth) in zip(batch.tuples(), [(5, 3), (0, 0)], strict=True))
    both = TupleBatch.from_tuples([first, second], ("str",))
    back = decode_tuples(encode_tuples(both)).tuples()
    assert [(x.emitted_by, x.nth, x.path) for x in back] == [
        (5, 3, child_path(5, 3)), (0, 0, child_path(0, 0))]
    only_first_hop = TupleBatch.from_tuples([second], ("str",))
    assert BY_COL not in only_first_hop.data.schema.names
    assert decode_tuples(encode_tuples(only_first_hop)).tuples()[0].path == child_path(0, 0)
    spout_tuples = TupleBatch.from_tuples(_sentences_with_origins(h, ["w"]).tuples(), ("str",))
    assert NTH_COL not in spout_tuples.data.schema.names
    assert spout_tuples.tuples()[0].path == 0
    bad = both.data.set_column(both.data.schema.get_field_index(NTH_COL), NTH_COL,
                               pa.array([3, 0], pa.int64()))
    with pytest.raises(WireFormatError, match="lineage columns"):
        decode_tuples(encode_tuples(TupleBatch(bad)))


@given(st.lists(st.integers(0, 5), max_size=60), st.integers(0, (1 << 64) - 1))
def test_child_paths_are_child_path_for_many_and_never_zero(parents: list[int],
                                                            base: int) -> None:
    for order in (parents, sorted(parents)):  # sorted: a batch bolt's usual output
        seen: dict[int, int] = {}
        for p, j in zip(order, occurrence(np.asarray(order, np.int64)).tolist(), strict=True):
            assert j == seen.get(p, 0)
            seen[p] = j + 1
    par = np.asarray(parents, np.int64)
    nth = occurrence(par)
    paths = np.full(par.size, base, np.uint64)
    many = child_paths(paths, nth)
    assert many.tolist() == [child_path(base, j) for j in nth.tolist()]
    assert 0 not in many.tolist()


def test_a_tuple_read_from_a_batch_pickles_on_its_own() -> None:
    """A bolt's state may keep tuples (a join's held inputs): each pickles with its
    values, tree membership and bookkeeping, not its batch's group."""
    h = Harness()
    first, second, *_ = _sentences_with_origins(
        h, ["x y", "z", *(f"s{i}" for i in range(500))]).tuples()
    Anchoring(h.ids).emit_one(second)
    back = pickle.loads(pickle.dumps(second))
    assert (back.values, back.fields, back.anchors, back.origin, back.path, back.stream,
            back.source) == (second.values, second.fields, second.anchors,
                             ("sentences:0", 101), second.path, "default", "sentences")
    assert Anchoring.held(back) == Anchoring.held(second) != (0, 0)
    assert len(pickle.dumps(first)) < 200  # its own values, not its batch's columns
