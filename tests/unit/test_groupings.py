"""Local-or-shuffle, partial key and custom groupings: routing, declaration, validation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.groupings import ByFirstLetter, topology
from squall.bolt import BasicBolt
from squall.core.errors import TopologyError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.grouping import (
    CustomStreamGrouping,
    Edge,
    Grouping,
    edge_flag,
    parse_edge,
)
from squall.core.topology.model import TopologySpec
from squall.core.topology.routing import Router, fields_hash, second_hash
from squall.core.topology.topics import edge_topic
from squall.tuples import Tuple
from tests.unit.test_executor import Harness, ctx, make_executor, through

WORDS = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


def pk_edge(n: int, fields: tuple[str, ...] = ("word",)) -> Edge:
    return Edge("tag", "t", n, Grouping.PARTIAL_KEY, fields)


@pytest.mark.parametrize(("sources", "targets"), [(2, 2), (2, 6), (3, 7), (4, 2), (5, 3)])
def test_local_or_shuffle_keeps_each_emitter_to_its_own_tasks_and_covers_them_all(
        sources: int, targets: int) -> None:
    edge = Edge("split", "t", targets, Grouping.LOCAL_OR_SHUFFLE, sources=sources)
    seen: dict[int, set[int]] = {}
    for task in range(sources):
        r = Router.for_edge(edge, ("line",), task)
        seen[task] = set(r.route_n(5).tolist()) | set(r.route_n(9).tolist())
        own = {p for p in range(targets) if p % sources == task} if targets >= sources \
            else {task % targets}
        assert seen[task] == own
    # every target task gets tuples from some emitter
    assert set().union(*seen.values()) == set(range(targets))


def test_local_or_shuffle_balances_over_an_emitters_tasks() -> None:
    r = Router.for_edge(Edge("split", "t", 6, Grouping.LOCAL_OR_SHUFFLE, sources=2), (), 1)
    got = Counter(r.route_n(3).tolist() + r.route_n(6).tolist())
    assert got == {1: 3, 3: 3, 5: 3}


@given(st.lists(WORDS, max_size=300), st.integers(2, 9))
def test_partial_key_sends_a_key_to_one_of_its_two_candidates(words: list[str],
                                                              n: int) -> None:
    r = Router.for_edge(pk_edge(n), ("word",))
    parts = r.route([(w,) for w in words]).tolist()
    for w, p in zip(words, parts, strict=True):
        assert p in {fields_hash([w]) % n, second_hash([w]) % n}


@given(st.lists(WORDS, max_size=300), st.integers(1, 9))
def test_partial_key_routes_rows_and_columns_alike(words: list[str], n: int) -> None:
    by_rows = Router.for_edge(pk_edge(n), ("word",)).route([(w,) for w in words])
    by_cols = Router.for_edge(pk_edge(n), ("word",)).route_columns(
        {"word": pa.array(words, pa.string())}, len(words))
    assert by_rows.tolist() == by_cols.tolist()


def test_partial_key_spreads_a_hot_key_over_two_tasks_where_fields_uses_one() -> None:
    # half the tuples are one word: fields grouping loads one task with all of them
    hot = next(w for w in (f"w{i}" for i in range(100))
               if fields_hash([w]) % 4 != second_hash([w]) % 4)
    words = [hot if i % 2 == 0 else f"cold{i % 50}" for i in range(4000)]
    rows = [(w,) for w in words]
    pk = Counter(Router.for_edge(pk_edge(4), ("word",)).route(rows).tolist())
    fields = Counter(Router.for_edge(Edge("tag", "t", 4, Grouping.FIELDS, ("word",)),
                                     ("word",)).route(rows).tolist())
    hot_tasks = Counter(p for w, p in zip(words, Router.for_edge(pk_edge(4), ("word",)).route(
        rows).tolist(), strict=True) if w == hot)
    assert len(hot_tasks) == 2
    assert max(pk.values()) < 0.4 * len(words) < 0.5 * len(words) <= max(fields.values())


def test_partial_key_on_two_fields_and_on_numbers() -> None:
    r = Router.for_edge(pk_edge(5, ("a", "b")), ("a", "b", "c"))
    rows = [(i % 3, f"x{i % 2}", i) for i in range(60)]
    parts = r.route(rows).tolist()
    for row, p in zip(rows, parts, strict=True):
        assert p in {fields_hash(row[:2]) % 5, second_hash(row[:2]) % 5}
    cols = {"a": pa.array([x[0] for x in rows]), "b": pa.array([x[1] for x in rows]),
            "c": pa.array([x[2] for x in rows])}
    assert Router.for_edge(pk_edge(5, ("a", "b")), ("a", "b", "c")).route_columns(
        cols, len(rows)).tolist() == parts


class Odd(CustomStreamGrouping):
    def prepare(self, source_task: int, stream: str, target_tasks: int) -> None:
        self.prepared = (source_task, stream, target_tasks)

    def choose_task(self, values: Sequence[Any]) -> int:
        return int(values[0]) * 2 + 1  # out of range for most


class NotAGrouping:
    pass


def custom_edge(cls: str, n: int = 3) -> Edge:
    return Edge("initials", "t", n, Grouping.CUSTOM, grouping_class=cls)


def test_a_custom_grouping_is_prepared_and_asked_for_each_tuple() -> None:
    r = Router.for_edge(custom_edge("examples.groupings:ByFirstLetter", 3), ("word", "n"), 1)
    assert isinstance(r.custom, ByFirstLetter) and r.custom.tasks == 3
    rows = [("apple", 1), ("Banana", 2), ("cherry", 3), ("", 4)]
    want = [ord("a") % 3, ord("b") % 3, ord("c") % 3, 0]
    assert r.route(rows).tolist() == want
    cols = {"word": pa.array([x[0] for x in rows]), "n": pa.array([x[1] for x in rows])}
    assert r.route_columns(cols, len(rows)).tolist() == want
    odd = Router.for_edge(custom_edge(f"{__name__}:Odd", 4), ("n",), 2)
    assert isinstance(odd.custom, Odd) and odd.custom.prepared == (2, "default", 4)


def test_a_custom_grouping_that_names_a_task_out_of_range_is_an_error_naming_it() -> None:
    r = Router.for_edge(custom_edge(f"{__name__}:Odd", 4), ("n",))
    assert r.route([(0,), (1,)]).tolist() == [1, 3]
    with pytest.raises(TopologyError, match=r"chose task 5 for \[2\].*0\.\.3"):
        r.route([(2,)])


@pytest.mark.parametrize(("cls", "message"), [
    ("no.such.module:X", "cannot be loaded"),
    (f"{__name__}:Missing", "cannot be loaded"),
    (f"{__name__}:NotAGrouping", "is not a squall.topology.CustomStreamGrouping"),
])
def test_a_custom_grouping_that_cannot_be_used_says_why(cls: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        Router.for_edge(custom_edge(cls), ("n",))


def test_value_groupings_cannot_route_by_count_alone() -> None:
    for edge in (pk_edge(2), custom_edge("examples.groupings:ByFirstLetter")):
        with pytest.raises(TopologyError, match="groups by values"):
            Router.for_edge(edge, ("word",)).route_n(3)


@given(st.sampled_from(list(Grouping)), st.integers(1, 9), st.integers(1, 9),
       st.sampled_from(["default", "errors"]))
def test_edge_flags_round_trip(grouping: Grouping, n: int, sources: int, stream: str) -> None:
    fields = ("word", "n") if grouping in (Grouping.FIELDS, Grouping.PARTIAL_KEY) else ()
    cls = "examples.groupings:ByFirstLetter" if grouping is Grouping.CUSTOM else ""
    edge = Edge("tag", edge_topic("t", "split", stream, "tag"), n, grouping, fields, stream,
                sources, cls)
    assert parse_edge(edge_flag(edge), "t", "split", sources) == edge


def test_the_example_builds_the_same_in_python_and_yaml() -> None:
    yaml = Path(__file__).resolve().parents[2] / "examples" / "groupings.yaml"
    assert TopologySpec.from_text(yaml.read_text()) == topology()
    spec = topology()
    assert TopologySpec.from_dict(spec.to_dict()) == spec
    (initials,) = [i for b in spec.bolts if b.name == "initials" for i in b.inputs]
    assert initials.grouping_class == "examples.groupings:ByFirstLetter"
    (edge,) = [e for e in spec.edges_from("sentences")]
    assert (edge.grouping, edge.sources) == (Grouping.LOCAL_OR_SHUFFLE, 2)


def spec_with(inputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "g", "spouts": [{"name": "s", "topics": ["t"]}],
            "bolts": [{"name": "b", "class": "m:B", "outputs": {"default": ["x"]},
                       "inputs": [{"component": "s", "grouping": "shuffle"}]},
                      {"name": "c", "class": "m:C", "inputs": inputs}]}


@pytest.mark.parametrize(("inputs", "message"), [
    ([{"component": "b", "grouping": "partial_key"}],
     "bolt 'c': partial_key grouping on 'b' by ['(none given)']"),
    ([{"component": "b", "grouping": "partial_key", "fields": ["y"]}],
     "bolt 'c': partial_key grouping on 'b' by ['y'], not among its output fields ['x']"),
    ([{"component": "b", "grouping": "custom"}],
     "bolt 'c': input from 'b': a custom grouping and only it names a class"),
    ([{"component": "b", "grouping": "shuffle", "class": "m:G"}],
     "a custom grouping and only it names a class (grouping 'shuffle', class 'm:G')"),
    ([{"component": "b", "grouping": "custom", "class": "not a class"}],
     "grouping class 'not a class' must be 'module:Class'"),
    ([{"component": "b", "grouping": "local_or_shuffle", "fields": ["x"]}],
     "local_or_shuffle grouping on 'b' takes no fields"),
    ([{"component": "s", "grouping": "custom", "class": "m:G"}],
     "bolt 'c': a custom grouping takes a bolt's stream, not 's''s"),
])
def test_invalid_groupings_name_the_field(inputs: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(TopologyError) as e:
        TopologySpec.from_dict(spec_with(inputs))
    assert message in str(e.value)


def test_a_partial_key_grouping_cannot_feed_a_persistent_aggregate() -> None:
    b = TopologyBuilder()
    b.set_spout("s", "t")
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("s")
    b.persistent_aggregate("count", ["word"], "count", 2).partial_key_grouping("split",
                                                                               ["word"])
    with pytest.raises(TopologyError, match="fields"):
        b.build("g")


def test_a_custom_grouping_defined_in_main_is_refused() -> None:
    cls = type("Local", (CustomStreamGrouping,), {"__module__": "__main__"})
    with pytest.raises(TopologyError, match="defined in __main__"):
        TopologyBuilder().set_bolt("b", "m:B", 1).custom_grouping("s", cls)


def test_routes_are_int64_arrays() -> None:
    r = Router.for_edge(pk_edge(3), ("word",))
    assert r.route([]).dtype == np.int64 and r.route([("a",)]).dtype == np.int64


def test_a_custom_grouping_cannot_take_a_persistent_aggregate_s_values() -> None:
    b = TopologyBuilder()
    b.set_spout("s", "t")
    b.persistent_aggregate("count", ["str"], "count", 1).fields_grouping("s", ["str"])
    b.set_bolt("after", "m:B", 1).custom_grouping("count", ByFirstLetter)
    with pytest.raises(TopologyError, match="a custom grouping takes a bolt's stream"):
        b.build("g")


class Failing(CustomStreamGrouping):
    def choose_task(self, values: Sequence[Any]) -> int:
        if values[0] == "boom":
            raise ValueError("no task for boom")
        return 0


class Echo(BasicBolt):
    outputs: ClassVar = {"default": ("word",)}

    def process(self, t: Tuple) -> list[tuple[Any, ...]]:
        return [(t[0],)]


def test_a_custom_grouping_that_fails_fails_only_the_input_it_was_emitting_for() -> None:
    """The grouping runs as the bolt emits: its error is the input's, which fails (its tree
    replays or is dead-lettered, naming the grouping); the rest of the batch goes on."""
    h = Harness()
    ex = make_executor(Echo(), ctx("echo"), [custom_edge(f"{__name__}:Failing", 2)],
                       ids=h.ids)
    _, batch = h.spout(["fine", "boom", "also fine"])
    res = ex.run(through([batch]))
    assert (res.acked, res.failed) == (2, 1)
    assert any("custom grouping" in e and "no task for boom" in e for e in res.errors)
    sent = [t["word"] for _, _, b in res.outputs for t in b.tuples()]
    assert sorted(sent) == ["also fine", "fine"]
