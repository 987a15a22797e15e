"""Bolts that misbehave on purpose, to show (and test) replay and timeouts.

Each misbehaves once per sentence. Spark may run a task in a different Python
worker from one micro-batch to the next, so "once" is remembered in
``conf["state_dir"]`` (a marker file per sentence, created atomically) when
given, else in memory.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc

from squall.bolt import PARENT, BasicBolt, BatchBolt, Bolt
from squall.tuples import Tuple


class _EveryKthOnce:
    """True for a sentence ending in a multiple of ``k``, the first time it is seen."""

    def __init__(self, conf: Any) -> None:
        self.k = int(conf.get("k", 5))
        self.dir = Path(conf["state_dir"]) if conf.get("state_dir") else None
        self.seen: set[str] = set()
        if self.dir:
            self.dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, text: str) -> bool:
        return int(text.split()[-1]) % self.k == 0 and self._first_time(text)

    def _first_time(self, text: str) -> bool:
        if self.dir is None:
            new = text not in self.seen
            self.seen.add(text)
            return new
        marker = self.dir / hashlib.sha1(text.encode()).hexdigest()
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True


class FailEveryKth(BasicBolt):
    """Raises on sentences whose number is a multiple of ``k`` - the first time it sees them."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.misbehave = _EveryKthOnce(conf)

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        text = str(t[0])
        if self.misbehave(text):
            raise RuntimeError(f"sentence {text.split()[-1]} fails once")
        return [(w,) for w in text.split()]


class ForgetEveryKth(Bolt):
    """Never acks sentences whose number is a multiple of ``k`` the first time: they time out."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.misbehave = _EveryKthOnce(conf)

    def execute(self, t: Tuple) -> None:
        text = str(t[0])
        if self.misbehave(text):
            return  # neither acked nor failed: the acker times the tree out
        for w in text.split():
            self.collector.emit((w,), t)
        self.collector.ack(t)


class EmitThenForgetEveryKth(Bolt):
    """Emits the words of every sentence, anchored, but does not ack those whose number is a
    multiple of ``k`` the first time: their words are counted, then the tree times out and
    the spout emits the sentence again. At-least-once state counts those words twice."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.misbehave = _EveryKthOnce(conf)

    def execute(self, t: Tuple) -> None:
        text = str(t[0])
        for w in text.split():
            self.collector.emit((w,), t)
        if not self.misbehave(text):
            self.collector.ack(t)


class SplitOrRaise(BasicBolt):
    """Splits sentences into words; raises on every sentence that starts with ``poison``
    (each attempt: such a sentence is replayed until it is dead-lettered)."""

    outputs: ClassVar = {"default": ("word",)}

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        text = str(t[0])
        if text.startswith("poison"):
            raise ValueError(f"a poison sentence: {text!r}")
        return [(w,) for w in text.split()]


def misbehave(text: str) -> None:
    """What a sentence's first word asks of the process running the bolt on it: ``crash``
    exits it at once (``os._exit(17)``, as a library might), ``segv`` makes it segfault (a
    null read through ctypes, as a C extension might), ``hang`` never returns (blocks on a
    lock no one will release, as a remote call without a timeout might)."""
    head = text.split(" ", 1)[0]
    if head == "crash":
        os._exit(17)
    if head == "segv":
        import ctypes

        ctypes.string_at(0)
    if head == "hang":
        import threading

        threading.Event().wait()


class SplitOrDie(SplitOrRaise):
    """Splits sentences into words; a sentence starting with ``crash``, ``segv`` or ``hang``
    kills or hangs the process running the bolt (:func:`misbehave`), one starting with
    ``poison`` raises (:class:`SplitOrRaise`), at every attempt."""

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        misbehave(str(t[0]))
        return super().process(t)


class SplitOrDieArrow(BatchBolt):
    """:class:`SplitOrDie` vectorized: one call over the micro-batch, which kills or hangs
    its process if any of its sentences asks to."""

    outputs: ClassVar = {"default": ("word",)}

    def process_arrow(self, table: pa.Table) -> pa.Table:
        col = table.column(0).cast(pa.string())
        for text in pc.filter(col, pc.match_substring_regex(col, "^(crash|segv|hang) "
                                                            )).to_pylist():
            misbehave(str(text))
        lists = pc.utf8_split_whitespace(col)
        words, parents = pc.list_flatten(lists), pc.list_parent_indices(lists)
        keep = pc.not_equal(words, "")
        return pa.table({"word": words.filter(keep), PARENT: parents.filter(keep)})


class CountOrDie(Bolt):
    """Counts words (task state) like the word count's ``WordCount``; the words ``crash``,
    ``segv`` and ``hang`` kill or hang its process (:func:`misbehave`), at every attempt."""

    outputs: ClassVar = {"default": ("word", "count")}
    stateful = True

    def execute(self, t: Tuple) -> None:
        word = str(t["word"])
        misbehave(word)
        n = self.state.get(word, 0) + 1
        self.state.put(word, n)
        self.collector.emit((word, n), t)
        self.collector.ack(t)


class DependencyDown(BasicBolt):
    """A bolt whose ``prepare`` fails, as one whose database is down would: no record is at
    fault, so none may be dead-lettered; the bolts job crash-loops, and says why."""

    outputs: ClassVar = {"default": ("word",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        raise ConnectionError(f"cannot reach {conf.get('url', 'db:5432')}: connection refused")

    def process(self, t: Tuple) -> Iterable[Sequence[Any]]:
        return [(w,) for w in str(t[0]).split()]
