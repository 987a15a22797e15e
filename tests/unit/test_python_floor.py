"""The per-tuple floor runs the bolts' real code over its stand-ins: a floor that did less
than the bolts ask would make Squall's executors look slower than they are."""

from __future__ import annotations

from typing import ClassVar

from benchmarks import python_floor
from examples.join import PairWords
from examples.wordcount import SplitSentence, WordCount
from squall.bolt import Bolt
from squall.tuples import Tuple


def test_the_split_and_count_do_their_work_over_the_stand_ins() -> None:
    words = python_floor.split(SplitSentence, ["a b a", "c  a"])
    assert [w["word"] for w in words] == ["a", "b", "a", "c", "a"]
    counted = python_floor.executed(WordCount, words)
    assert [v for v, _ in counted.emitted] == [("a", 1), ("b", 1), ("a", 2), ("c", 1),
                                               ("a", 3)]
    assert [a for _, a in counted.emitted] == words  # each anchored to its word
    assert counted.acked == words


def test_the_join_pairs_consecutive_words_anchored_to_both() -> None:
    words = python_floor.split(SplitSentence, ["x y z"])
    joined = python_floor.executed(PairWords, words)
    assert joined.emitted == [(("x", "y"), [words[0], words[1]]),
                              (("y", "z"), [words[1], words[2]])]
    assert joined.acked == words[:2]  # the last waits for its pair


class Seen(Bolt):
    """Keeps what reached it (a class attribute: the chain makes its own instance)."""

    outputs: ClassVar = {"default": ()}
    pairs: ClassVar[list[tuple[str, str]]] = []

    def execute(self, t: Tuple) -> None:
        Seen.pairs.append((t["first"], t["second"]))
        self.collector.ack(t)


def test_a_chain_gives_each_stage_the_one_befores_emits_by_their_declared_fields() -> None:
    Seen.pairs.clear()
    python_floor.chain_cpu([PairWords, Seen], SplitSentence, ["x y z", "w"])
    assert Seen.pairs == [("x", "y"), ("y", "z"), ("z", "w")]
