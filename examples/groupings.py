"""Groupings for skewed and local traffic: local-or-shuffle, partial key, a custom one.

A word count over a stream where a few words are very hot. The sentences reach ``split``
by local-or-shuffle (each spout task feeds its own split task). Words reach ``tag`` by
partial key grouping: a hot word is spread over two tasks instead of overloading one, so
what ``tag`` holds per word is partial, and the totals are merged downstream, fields
grouped by word (``count``). ``where`` shows how the words were spread: a count per
(word, tag task). ``initials`` gets the words by a custom grouping (one task per first
letter).

Run it: ``squall run examples/groupings.yaml`` (feed the topic "sentences").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from squall.bolt import BasicBolt
from squall.topology import CustomStreamGrouping, TopologyBuilder, TopologySpec
from squall.tuples import Tuple


class Tag(BasicBolt):
    """Per-key work (none here) tagged with the task that did it."""

    outputs: ClassVar = {"default": ("word", "task")}

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        return [(t["word"], self.context.task)]


class ByFirstLetter(CustomStreamGrouping):
    """A word goes to the task of its first letter (Storm's ``CustomStreamGrouping``)."""

    def prepare(self, source_task: int, stream: str, target_tasks: int) -> None:
        self.tasks = target_tasks

    def choose_task(self, values: Sequence[Any]) -> int:
        word = str(values[0])
        return ord(word[0].lower()) % self.tasks if word else 0


def topology(name: str = "groupings", source: str = "sentences") -> TopologySpec:
    """The same topology as ``groupings.yaml``, built in Python."""
    b = TopologyBuilder()
    b.set_spout("sentences", source, 2)
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
               outputs={"default": ["word"]}).local_or_shuffle_grouping("sentences")
    b.set_bolt("tag", Tag, 4, outputs=Tag.outputs).partial_key_grouping("split", ["word"])
    b.persistent_aggregate("count", ["word"], "count", 2).fields_grouping("tag", ["word"])
    b.persistent_aggregate("where", ["word", "task"], "count", 2
                           ).fields_grouping("tag", ["word", "task"])
    b.set_bolt("initials", Tag, 3, outputs=Tag.outputs).custom_grouping("split", ByFirstLetter)
    return b.build(name, ackers=2)
