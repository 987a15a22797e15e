"""A BasicBolt's rows anchored in columns (squall/core/tasks/column_runs.py) against the
same bolt run emit by emit: the same trees complete or fail, with the same children."""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

from squall.core.bolt_api.bolt import BasicBolt
from squall.core.reliability.records import Outcome
from squall.core.reliability.tuples import Tuple
from squall.core.tasks.exec_result import ExecResult
from squall.core.topology.grouping import Edge, Grouping
from squall.core.wire.tuple_batch import TupleBatch, decode_tuples, encode_tuples
from tests.unit.test_executor import Harness, ctx, make_executor, through

KINDS = ["words", "raise", "generator", "short", "scalar", "mixed", "side", "acks", "acks+rows",
         "none"]


class Scripted(BasicBolt):
    """What it does with an input is named by the input: ``kind:n``."""

    outputs: ClassVar = {"default": ("word", "n"), "side": ("x",)}

    def process(self, t: Tuple) -> Any:
        kind, _, n = str(t[0]).partition(":")
        rows: list[Any] = [(f"w{i}", i) for i in range(int(n))]
        if kind == "raise":
            raise ValueError(f"cannot take {t[0]!r}")
        if kind == "generator":  # raises once some rows were given
            return _then_raise(rows)
        if kind == "short":
            return [*rows, ("alone",)]
        if kind == "scalar":
            return [*rows, 7]
        if kind == "mixed":  # a list where the word column holds strings (two to one)
            return [*rows, ("one", 0), ("two", 0), (["not", "a", "word"], 0)]
        if kind == "side":
            self.collector.emit((f"side{n}",), t, stream="side")
        if kind in ("acks", "acks+rows"):
            self.collector.ack(t)
            return rows if kind == "acks+rows" else None
        return None if kind == "none" else rows


def _then_raise(rows: list[Any]) -> Any:
    yield from rows
    raise RuntimeError("the generator broke")


class ScriptedPerTuple(Scripted):
    """The same, with ``execute`` of its own: run emit by emit."""

    def execute(self, t: Tuple) -> None:
        BasicBolt.execute(self, t)


def _inputs(h: Harness, script: list[tuple[str, int]]) -> tuple[list[int], TupleBatch]:
    roots, batch = h.spout([f"{k}:{n}" for k, n in script])
    tuples = [Tuple(t.values, t.fields, t.anchors, origin=("sentences:0", 100 + i))
              for i, t in enumerate(batch.tuples())]
    return roots, TupleBatch.from_tuples(tuples, ("str",), source="sentences")


def _run(cls: type[Scripted], script: list[tuple[str, int]], edges: list[Edge], seed: int
         ) -> tuple[dict[int, Outcome], dict[int, Outcome], Counter[tuple[Any, ...]], ExecResult,
                    list[int]]:
    """Each root's outcome after the run's acks, and once downstream acked every child; the
    children of the trees that completed; the run's result; the roots."""
    h = Harness(seed)
    roots, batch = _inputs(h, script)
    res = make_executor(cls(), ctx("split"), edges, ids=h.ids).run(through([batch]))
    h.send(res.acks)
    early = dict(h.decided)  # a tree with children waits for them
    children: list[tuple[Tuple, str, int]] = []
    for topic, part, out in res.outputs:
        for t in decode_tuples(encode_tuples(out)).tuples():
            children.append((t, topic, part))
            h.send(h.anch.ack(t))
    done = {r for r, o in h.decided.items() if o is Outcome.ACKED}
    kept = Counter((topic, part, t.stream, repr(t.values), t.origin, t.emitted_by, t.nth)
                   for t, topic, part in children if set(t.anchors) <= done)
    return early, dict(h.decided), kept, res, roots


EDGES = {"fields": [Edge("count", "tc", 3, Grouping.FIELDS, ("word",)),
                    Edge("log", "tl", 2, Grouping.FIELDS, ("x",), stream="side")],
         "all": [Edge("count", "tc", 2, Grouping.ALL)],
         "nobody": []}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 4)), min_size=1, max_size=10),
       st.sampled_from(sorted(EDGES)), st.integers(0, 2**16))
def test_rows_anchored_in_columns_decide_every_tree_as_emit_by_emit(
        script: list[tuple[str, int]], edges: str, seed: int) -> None:
    columns = _run(Scripted, script, EDGES[edges], seed)
    per_tuple = _run(ScriptedPerTuple, script, EDGES[edges], seed)
    early, decided, kept, res, roots = columns
    assert early == per_tuple[0]
    assert decided == per_tuple[1]
    assert kept == per_tuple[2]
    assert set(res.reasons) == set(per_tuple[3].reasons)
    assert bool(res.errors) == bool(per_tuple[3].errors)
    # Every tree is decided: the rows' trees complete or fail, none waits.
    assert set(decided) == set(roots)
    failing = {"raise", "generator", "short", "scalar"} | (set() if edges == "nobody" else
                                                          {"mixed"})
    assert {r for r, (kind, _) in zip(roots, script, strict=True) if kind in failing} == \
        {r for r, o in decided.items() if o is Outcome.FAILED}


def test_a_row_that_fails_names_what_was_wrong() -> None:
    script = [("words", 2), ("short", 1), ("scalar", 0), ("mixed", 1), ("raise", 1)]
    *_, res, roots = _run(Scripted, script, EDGES["fields"], 0)
    assert (res.executed, res.acked, res.failed, res.emitted) == (5, 1, 4, 2)
    reasons = res.reasons
    assert "emit of 1 values on stream 'default' declared with fields ['word', 'n']" in \
        reasons[roots[1]]
    assert "emit of a int (not a sequence of values)" in reasons[roots[2]]
    assert "emitted on stream 'default': field 'word'" in reasons[roots[3]]
    assert reasons[roots[4]] == "bolt 'split' raised ValueError: cannot take 'raise:1'"
    assert roots[0] not in reasons
