"""Tick tuples: a word count that emits what it counted once a second (Storm's tick-driven
flush, as its ``RollingCountBolt`` does).

``count`` acks each word as it comes and keeps the count in its task's state; every tick
(``topology.tick.tuple.freq.secs``) it emits each word's count since the last tick and
starts again. The emitted counts are a feed: untracked, as a tick has no tree. ``log``
prints them.

Run it: ``squall run examples/ticks.yaml`` (feed the topic "sentences").
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from squall.bolt import BasicBolt, Bolt
from squall.core.topology.ticks import TICK_FREQ
from squall.topology import TopologyBuilder, TopologySpec
from squall.tuples import Tuple

log = logging.getLogger("examples.ticks")


class CountsPerTick(Bolt):
    """Counts words; on each tick, emits the counts since the last one."""

    outputs: ClassVar = {"default": ("word", "count")}
    stateful = True

    def execute(self, t: Tuple) -> None:
        if t.is_tick:
            for word in sorted(self.state):
                self.collector.emit((word, self.state[word]))
            for word in list(self.state):
                self.state.delete(word)
            return
        word = t["word"]
        self.state.put(word, self.state.get(word, 0) + 1)
        self.collector.ack(t)


class LogCounts(BasicBolt):
    outputs: ClassVar = {"default": ()}

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        log.info("%s: %d", t["word"], t["count"])
        return ()


def topology(name: str = "ticks", source: str = "sentences", every_s: float = 1) -> TopologySpec:
    """The same topology as ``ticks.yaml``, built in Python."""
    b = TopologyBuilder()
    b.set_spout("sentences", source)
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", CountsPerTick, 2).fields_grouping("split", ["word"]
                                                         ).add_configuration(TICK_FREQ, every_s)
    b.set_bolt("log", LogCounts, 1).global_grouping("count")
    return b.build(name, ackers=2)
