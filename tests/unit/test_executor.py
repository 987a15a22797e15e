"""Bolts run by the executor over micro-batches; trees tracked by a real ledger."""

from __future__ import annotations

import itertools
import random
from typing import Any, ClassVar

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.join import BatchTotal
from examples.wordcount import (
    SplitSentence,
    SplitSentenceArrow,
    SplitSentenceBatch,
    WordCount,
    WordCountArrow,
    WordCountBatch,
)
from squall.core.bolt_api.bolt import PARENT, BasicBolt, Bolt, TaskContext
from squall.core.bolt_api.state import KeyValueState
from squall.core.reliability.clock import ManualClock
from squall.core.reliability.ledger import Ledger
from squall.core.reliability.records import AckerBatch, Outcome
from squall.core.reliability.tuples import Anchoring, Tuple
from squall.core.tasks.exec_result import ExecResult
from squall.core.tasks.executor import BoltExecutor
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples

SPLIT_TO_COUNT = Edge("count", "squall.wc.edge.split.default.count", 3, Grouping.FIELDS,
                      ("word",))


def make_executor(*args: Any, **kw: Any) -> BoltExecutor:
    """An executor on a test clock (the core reads no wall clock)."""
    return BoltExecutor(*args, clock=ManualClock(), **kw)


def ctx(name: str) -> TaskContext:
    return TaskContext("wc", name, 0, 1)


class Harness:
    def __init__(self, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.ids = lambda: rng.getrandbits(63) + 1
        self.anch = Anchoring(self.ids)
        self.ledger = Ledger(30_000)
        self.decided: dict[int, Outcome] = {}

    def spout(self, sentences: list[str]) -> tuple[list[int], TupleBatch]:
        roots, tuples = [], []
        for s in sentences:
            e = self.anch.spout_emit(0, 1)
            self.send([e.init])
            roots.append(e.root)
            tuples.append(Tuple([s], ("str",), e.anchors[0]))
        return roots, TupleBatch.from_tuples(tuples, ("str",), source="sentences")

    def send(self, records: Any) -> None:
        batch = records if isinstance(records, AckerBatch) else \
            AckerBatch.from_records(list(records), 0)
        res = self.ledger.apply(batch, 0)
        self.decided.update(res.by_root())


def through(batches: list[TupleBatch]) -> list[TupleBatch]:
    """Across the wire, as the Spark job does."""
    return [decode_tuples(encode_tuples(b)) for b in batches]


@pytest.mark.parametrize(("split_cls", "count_cls"), [(SplitSentence, WordCount),
                                                      (SplitSentenceBatch, WordCountBatch),
                                                      (SplitSentenceArrow, WordCountArrow)])
def test_word_count_trees_complete_and_words_land_on_their_partition(
        split_cls: type, count_cls: type) -> None:
    h = Harness()
    split = make_executor(split_cls(), ctx("split"), [SPLIT_TO_COUNT], ids=h.ids)
    count = make_executor(count_cls(), ctx("count"), [], ids=h.ids)
    roots, batch = h.spout(["the cow jumped over the moon", "an apple a day", "the end"])
    out = split.run(through([batch]))
    assert out.errors == []
    h.send(out.acks)
    assert not h.decided, "no tree completes before its words are counted"
    by_part: dict[int, set[str]] = {}
    for _topic, part, b in out.outputs:
        by_part.setdefault(part, set()).update(b.data.column("word").to_pylist())
    assert sum(len(v) for v in by_part.values()) == len({w for s in ["the cow jumped over the moon",
                                                                     "an apple a day", "the end"]
                                                         for w in s.split()})
    assert all(not (a & b) for a, b in itertools.combinations(by_part.values(), 2))
    counted = count.run(through([b for _, _, b in out.outputs]))
    h.send(counted.acks)
    assert h.decided == {r: Outcome.ACKED for r in roots}
    assert count.state is not None and count.state["the"] == 3
    again = split.run(through([h.spout(["the the"])[1]]))
    more = count.run(through([b for _, _, b in again.outputs]))
    assert count.state["the"] == 5  # state across batches
    assert more.acked == 2
    # The emitted counts are the running counts: the two "the" of the second batch: 4, 5.
    assert count.state.changes() == {"the": 5, **{w: 1 for w in ("cow", "jumped", "over",
                                                                    "moon", "an", "apple", "a",
                                                                    "day", "end")}}


def test_the_vectorized_count_emits_running_counts_from_the_task_state() -> None:
    bolt = WordCountBatch()
    state = KeyValueState({"a": 10})
    bolt.init_state(state)
    out = bolt.process(pd.DataFrame({"word": ["a", "b", "a", "c", "b", "a"]}))
    assert out["count"].tolist() == [11, 1, 12, 1, 2, 13]
    assert out[PARENT].tolist() == list(range(6))
    assert state.changes() == {"a": 13, "b": 2, "c": 1}
    assert bolt.process(pd.DataFrame({"word": ["c"]}))["count"].tolist() == [2]


class Explodes(BasicBolt):
    outputs: ClassVar = {"default": ("word",)}

    def process(self, t: Tuple) -> Any:
        if "boom" in str(t[0]):
            raise ValueError(f"cannot split {t[0]!r}")
        return [(w,) for w in str(t[0]).split()]


def test_an_exception_fails_that_input_only_and_is_reported() -> None:
    h = Harness()
    ex = make_executor(Explodes(), ctx("split"), [], ids=h.ids)
    roots, batch = h.spout(["fine words", "boom goes it", "more words"])
    res = ex.run(through([batch]))
    h.send(res.acks)
    assert h.decided == {roots[0]: Outcome.ACKED, roots[1]: Outcome.FAILED,
                         roots[2]: Outcome.ACKED}
    assert res.errors == ["ValueError: cannot split 'boom goes it'"]
    assert (res.acked, res.failed) == (2, 1)
    # What it raised is why its tree failed, as the dead letter will say.
    assert res.reasons == {roots[1]: "bolt 'split' raised ValueError: cannot split "
                                     "'boom goes it'"}


class Watched:
    def __init__(self) -> None:
        self.calls: list[object] = []

    def enter(self, index: int) -> None:
        self.calls.append(index)

    def leave(self) -> None:
        self.calls.append("left")


def test_a_watch_is_told_of_each_call_into_the_bolt() -> None:
    h = Harness()
    _, batch = h.spout(["fine words", "boom goes it"])
    w = Watched()
    make_executor(Explodes(), ctx("split"), [], ids=h.ids).run(through([batch]), w)
    assert w.calls == [0, "left", 1, "left"]  # left after raising too
    w = Watched()
    make_executor(SplitSentenceArrow(), ctx("split"), [], ids=h.ids).run(through([batch]), w)
    assert w.calls == [-1, "left"]  # one call on all of them


def test_multi_anchored_aggregate_joins_the_trees() -> None:
    h = Harness()
    agg = make_executor(BatchTotal(), ctx("total"),
                       [Edge("sink", "t", 1, Grouping.GLOBAL, stream="default")],
                       conf={"size": 3}, ids=h.ids)
    roots, batch = h.spout(["1", "2", "3"])
    res = agg.run(through([batch]))
    h.send(res.acks)
    assert not h.decided  # the total, anchored to all three, is still out there
    ((_, part, out),) = res.outputs
    assert part == 0
    (total,) = out.tuples()
    assert total.values == (6, 3)
    assert set(total.anchors) == set(roots)
    h.send(Anchoring(h.ids).ack(total))
    assert h.decided == {r: Outcome.ACKED for r in roots}


class Streams(Bolt):
    outputs: ClassVar = {"default": ("x",), "errors": ("why",)}

    def execute(self, t: Tuple) -> None:
        if t[0] == "bad":
            self.collector.emit(("bad input",), t, stream="errors")
        else:
            self.collector.emit((t[0],), t)
            self.collector.emit((t[0],))  # unanchored: not tracked
        self.collector.ack(t)


def test_named_streams_all_grouping_and_unanchored_emits() -> None:
    h = Harness()
    edges = [Edge("a", "ta", 2, Grouping.ALL), Edge("e", "te", 1, Grouping.SHUFFLE,
                                                   stream="errors")]
    ex = make_executor(Streams(), ctx("s"), edges, ids=h.ids)
    roots, batch = h.spout(["ok", "bad"])
    res: ExecResult = ex.run(through([batch]))
    by_topic: dict[str, list[TupleBatch]] = {}
    for topic, _part, b in res.outputs:
        by_topic.setdefault(topic, []).append(b)
    assert sorted(len(b) for b in by_topic["ta"]) == [2, 2]  # 2 emits x 2 partitions
    (err,) = by_topic["te"]
    assert err.stream == "errors"
    assert err.tuples()[0].values == ("bad input",)
    tracked = [t for b in by_topic["ta"] for t in b.tuples() if t.tracked]
    assert len(tracked) == 2  # the anchored copy on each partition; the unanchored ones are not
    h.send(res.acks)
    for t in [*tracked, *err.tuples()]:
        h.send(Anchoring(h.ids).ack(t))
    assert h.decided == {r: Outcome.ACKED for r in roots}


def test_vectorized_path_fails_every_input_when_the_batch_raises() -> None:
    from squall.core.bolt_api.bolt import BatchBolt

    class Broken(BatchBolt):
        outputs: ClassVar = {"default": ("word",)}

        def process(self, df: Any) -> Any:
            raise KeyError("no such column")

    h = Harness()
    ex = make_executor(Broken(), ctx("b"), [], ids=h.ids)
    roots, batch = h.spout(["a", "b"])
    res = ex.run(through([batch]))
    h.send(res.acks)
    assert h.decided == {r: Outcome.FAILED for r in roots}
    assert res.errors == ["KeyError: 'no such column'"]
    assert set(res.reasons) == set(roots)


def test_fields_grouping_of_many_strings_matches_the_row_by_row_hash() -> None:
    from squall.core.topology.grouping import Edge, Grouping
    from squall.core.topology.routing import Router, fields_hash

    words = [f"w{i % 37}" for i in range(500)] + ["", "é", "a\x1fb"]
    r = Router.for_edge(Edge("count", "t", 7, Grouping.FIELDS, ("word",)), ("word",))
    got = r.route([(w,) for w in words]).tolist()
    assert got == [fields_hash([w]) % 7 for w in words]


@given(st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=5)), st.integers(-3, 3)),
                max_size=80),
       st.integers(1, 9), st.sampled_from([("word",), ("n",), ("word", "n")]))
def test_a_batch_bolts_columns_route_as_its_rows_would(
        rows: list[tuple[str | None, int]], parts: int, fields: tuple[str, ...]) -> None:
    """The columnar route (a batch bolt's output, never made into Python rows) sends every
    row where the row-by-row fields hash does: strings, nulls, other types, several fields."""
    import pyarrow as pa

    from squall.core.topology.routing import Router

    r = Router.for_edge(Edge("count", "t", parts, Grouping.FIELDS, fields), ("word", "n"))
    cols = {"word": pa.array([w for w, _ in rows], pa.string()),
            "n": pa.array([n for _, n in rows], pa.int64())}
    assert r.route_columns(cols, len(rows)).tolist() == r.route(rows).tolist()


def test_a_batch_bolt_sees_one_frame_of_inputs_from_several_sources() -> None:
    """Inputs with other fields (or another type for a field) come as one frame, in order,
    each row labelled with its stream and source."""
    import pandas as pd
    import pyarrow as pa

    from squall.core.bolt_api.batch_io import input_frame as _frame
    from squall.core.bolt_api.bolt import PARENT, BatchBolt

    a = TupleBatch.single_anchored({"word": pa.array(["x", "y"])}, None, None, source="s1")
    b = TupleBatch.single_anchored({"word": pa.array(["z"]), "n": pa.array([7])}, None, None,
                                   stream="other", source="s2")
    c = TupleBatch.single_anchored({"word": pa.array([3])}, None, None, source="s3")
    df = _frame([a, b])
    assert df["word"].tolist() == ["x", "y", "z"]
    assert df["n"].isna().tolist() == [True, True, False]
    assert df["__stream"].tolist() == ["default", "default", "other"]
    assert df["__source"].tolist() == ["s1", "s1", "s2"]
    mixed = _frame([a, c])  # string and int64 for one field: pandas unifies them
    assert mixed["word"].tolist() == ["x", "y", 3]
    assert mixed["__source"].tolist() == ["s1", "s1", "s3"]

    seen: list[pd.DataFrame] = []

    class Spy(BatchBolt):
        outputs: ClassVar = {}

        def process(self, df: pd.DataFrame) -> pd.DataFrame:
            seen.append(df)
            return pd.DataFrame({PARENT: pd.Series([], dtype="int64")})

    make_executor(Spy(), ctx("spy"), []).run([a, b])
    assert seen[0]["word"].tolist() == ["x", "y", "z"]


def test_a_half_join_in_the_state_follows_the_task_to_another_worker() -> None:
    """Two Python workers run the same task's micro-batches in turn: the buffer carried by
    the state (pickled, as the task's state log carries it) joins across them."""
    import pickle

    h = Harness()
    edges = [Edge("sink", "t", 1, Grouping.GLOBAL, stream="default")]
    first = make_executor(BatchTotal(), ctx("total"), edges, conf={"size": 3}, ids=h.ids)
    second = make_executor(BatchTotal(), ctx("total"), edges, conf={"size": 3}, ids=h.ids)
    roots, batch = h.spout(["1", "2", "3"])
    tuples = through([batch])[0].tuples()
    a = first.run([TupleBatch.from_tuples(tuples[:2], tuples[0].fields)])
    assert not a.outputs and not a.warnings
    assert first.state is not None and second.state is not None
    second.state.update(pickle.loads(pickle.dumps(dict(first.state))))  # the state log's job
    b = second.run([TupleBatch.from_tuples(tuples[2:], tuples[0].fields)])
    ((_, _, out),) = b.outputs
    assert out.tuples()[0].values == (6, 3)
    h.send(AckerBatch.concat([a.acks, b.acks]))
    h.send(Anchoring(h.ids).ack(out.tuples()[0]))
    assert h.decided == {r: Outcome.ACKED for r in roots}


class Hoarder(Bolt):
    """The trap: a half-join in an attribute."""

    outputs: ClassVar = {"default": ("x",)}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.seen: list[Tuple] = []

    def execute(self, t: Tuple) -> None:
        self.seen.append(t)
        self.collector.ack(t)


def test_attributes_kept_across_micro_batches_are_warned_about_once() -> None:
    h = Harness()
    ex = make_executor(Hoarder(), ctx("hoard"), [], ids=h.ids)
    _, batch = h.spout(["a", "b"])
    res = ex.run(through([batch]))
    assert len(res.warnings) == 1 and "'seen'" in res.warnings[0]
    assert "state API" in res.warnings[0]
    _, batch = h.spout(["c"])
    assert ex.run(through([batch])).warnings == []


class Mixed(Bolt):
    """Emits its input's number, or a word where a number is expected."""

    outputs: ClassVar = {"default": ("n",)}

    def execute(self, t: Tuple) -> None:
        text = str(t[0])
        self.collector.emit((int(text) if text.isdigit() else text,), t)
        self.collector.ack(t)


def test_an_emitted_value_that_cannot_share_its_column_fails_only_its_tree() -> None:
    h = Harness()
    ex = make_executor(Mixed(), ctx("mixed"), [Edge("sink", "t", 1, Grouping.GLOBAL)], ids=h.ids)
    roots, batch = h.spout(["1", "2", "seven", "4"])
    res = ex.run(through([batch]))
    assert len(res.errors) == 1 and "'seven'" in res.errors[0]
    ((_, _, out),) = res.outputs
    assert out.data.column("n").to_pylist() == [1, 2, 4]
    h.send(res.acks)
    assert h.decided == {roots[2]: Outcome.FAILED}  # the others wait for their children


class _Fanout(Bolt):
    """Per input: ``plan[i]`` children, the odd ones anchored to it and to the input held
    from before (a join's two parents); then the held input is acked, and this one held,
    or failed where the plan says -1. The last input held stays pending."""

    outputs: ClassVar = {"default": ("n",)}

    def __init__(self, plan: list[int]) -> None:
        self.plan, self.i = plan, 0
        self.held: Tuple | None = None

    def execute(self, t: Tuple) -> None:
        k = self.plan[self.i % len(self.plan)]
        self.i += 1
        held = self.held
        for j in range(max(k, 0)):
            self.collector.emit((j,), [t, held] if j % 2 == 1 and held is not None else t)
        if held is not None:
            self.collector.ack(held)
        self.held = None if k < 0 else t
        if k < 0:
            self.collector.fail(t)


@given(st.lists(st.integers(-1, 3), min_size=1, max_size=8), st.integers(1, 12),
       st.sampled_from(["shuffle", "all", "two", "none"]), st.integers(0, 2**16))
def test_every_emit_path_keeps_the_trees_arithmetic(
        plan: list[int], n: int, subscribers: str, seed: int) -> None:
    """The one-anchor, one-subscriber path, the general one (several anchors, an all
    grouping, two subscribers) and a stream nobody subscribes to: a tree with children
    stays open in a real ledger until they are acked downstream; then it is complete
    exactly when none of its tuples failed."""
    h = Harness(seed)
    edges = {"shuffle": [Edge("a", "ta", 2, Grouping.SHUFFLE)],
             "all": [Edge("a", "ta", 3, Grouping.ALL)],
             "two": [Edge("a", "ta", 2, Grouping.SHUFFLE),
                     Edge("b", "tb", 2, Grouping.FIELDS, ("n",))],
             "none": []}[subscribers]
    roots, batch = h.spout([f"s{i}" for i in range(n)])
    ex = make_executor(_Fanout(plan), ctx("fan"), edges, ids=h.ids)
    half = n // 2  # two micro-batches: the emits of each reach its flush
    runs = [ex.run(through([TupleBatch(batch.data.slice(lo, hi - lo), batch.stream,
                                       batch.source)]))
            for lo, hi in ((0, half), (half, n)) if hi > lo]
    for res in runs:
        h.send(res.acks)
    # A tree with children is open until they are acked downstream.
    parents = {roots[i] for i in range(n) if plan[i % len(plan)] > 0 and edges}
    assert not {r for r, o in h.decided.items() if o is Outcome.ACKED} & parents
    for _, _, out in (o for res in runs for o in res.outputs):  # downstream acks every child
        h.send([r for t in decode_tuples(encode_tuples(out)).tuples() for r in h.anch.ack(t)])
    failed = {roots[i] for i in range(n) if plan[i % len(plan)] < 0}
    kept = {roots[-1]} if plan[(n - 1) % len(plan)] >= 0 else set()  # held: pending
    assert {r for r, o in h.decided.items() if o is Outcome.ACKED} == \
        set(roots) - failed - kept
    assert {r for r, o in h.decided.items() if o is Outcome.FAILED} == failed
