"""A resubmission keeping a killed submission's state: what must match, where its spouts
start, and which killed submission's state may be kept."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.kept_state import (
    carried_offsets,
    check_compatible,
    incompatibilities,
    kept_teardown,
)
from squall.core.control.teardown import Teardown, prunable
from squall.core.errors import NotFoundError, StateConflict
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec

OLD = "wc-3-1700000000"


def spec(name: str = OLD, split: int = 2, count: int = 2, by: str = "word",
         kind: str = "opaque", aggregator: str = "count", state_name: str | None = None,
         topics: tuple[str, ...] = ("sentences",), tally: bool = False) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", list(topics), 2, scheme="text")
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", split,
               outputs={"default": ["word", "letter"]}).shuffle_grouping("sentences")
    kw: dict[str, Any] = {"kind": kind, "state_name": state_name}
    if aggregator == "sum":
        kw["fields"] = ["letter"]
    b.persistent_aggregate("count", [by], aggregator, count, **kw).fields_grouping(
        "split", [by])
    if tally:
        b.set_bolt("tally", "examples.wordcount:WordCount", 1,
                   outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    return b.build(name)


def test_what_the_state_does_not_depend_on_may_change() -> None:
    assert incompatibilities(spec(), spec("wc-4-1700000100")) == []
    # another parallelism of a stateless bolt, another bolt, another source topic
    assert incompatibilities(spec(), spec("wc-4-1", split=5, tally=True,
                                          topics=("sentences", "more"))) == []
    # a state named in the spec is its name's, not the id's to keep
    assert incompatibilities(spec(state_name="shared"), spec("wc-4-1", count=3,
                                                             state_name="shared")) == []


@pytest.mark.parametrize(("change", "said"), [
    ({"count": 3}, "component 'count': its parallelism was 2, now 3"),
    ({"by": "letter"}, "component 'count': its key fields was ['word'], now ['letter']"),
    ({"kind": "transactional"}, "its state kind was 'opaque', now 'transactional'"),
    ({"aggregator": "sum"}, "its aggregator or updater was 'count', now 'sum'"),
    ({"state_name": "elsewhere"}, "is now not a persistent_aggregate or partition_persist "
                                  "with a state named by the topology"),
])
def test_a_change_the_state_depends_on_is_refused_by_name(change: dict[str, Any],
                                                          said: str) -> None:
    with pytest.raises(StateConflict) as e:
        check_compatible(spec(), spec("wc-4-1", **change))
    assert said in str(e.value) and OLD in str(e.value) and "--keep-state" in str(e.value)


def test_a_stateful_component_that_is_gone_is_refused() -> None:
    b = TopologyBuilder()
    b.set_spout("sentences", ["sentences"], 2, scheme="text")
    b.set_bolt("split", "examples.wordcount:SplitSentenceArrow", 2,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    assert incompatibilities(spec(), b.build("wc-4-1")) == [
        f"component 'count' keeps state in {OLD} and is not in the new topology"]


def test_spouts_start_where_their_namesakes_got_to_on_the_topics_they_still_read() -> None:
    recorded = {"sentences": {"sentences": {0: 40, 1: 17}, "gone": {0: 5}},
                "removed": {"x": {0: 1}}}
    assert carried_offsets(recorded, spec("wc-4-1", topics=("sentences", "more"))) == {
        "sentences": [("sentences", 0, 40), ("sentences", 1, 17)]}
    assert carried_offsets({}, spec("wc-4-1")) == {}


def teardown(tid: str, since: int, done: bool = True, purge: bool = False,
             state_of: str | None = None) -> Teardown:
    s = spec(tid)
    return Teardown(tid, "wc", since, since + 1 if done else None, purge_state=purge,
                    spec=dataclasses.replace(s, state_of=state_of),
                    offsets={"sentences": {"sentences": {0: since}}})


def test_the_kept_state_is_a_done_unpurged_teardown_and_the_newest_of_its_state() -> None:
    first, second = teardown("wc-1-1", 10), teardown("wc-2-2", 20, state_of="wc-1-1")
    other = teardown("wc-3-3", 30)
    both = [other, second, first]
    assert kept_teardown("wc-2-2", both, {}) is second
    assert kept_teardown("wc", [first, second], {}) is second  # a name: its newest
    with pytest.raises(StateConflict, match="was kept and changed by wc-2-2 since"):
        kept_teardown("wc-1-1", both, {})
    with pytest.raises(StateConflict, match="in use by the live topology wc-9-9"):
        kept_teardown("wc-2-2", both, {"wc-1-1": "wc-9-9"})
    with pytest.raises(StateConflict, match="still being torn down"):
        kept_teardown("wc-4-4", [teardown("wc-4-4", 40, done=False)], {})
    with pytest.raises(StateConflict, match="was purged"):
        kept_teardown("wc-4-4", [teardown("wc-4-4", 40, purge=True)], {})
    with pytest.raises(NotFoundError, match="no killed topology 'nope'"):
        kept_teardown("nope", both, {})


@given(st.dictionaries(st.sampled_from(["sentences", "more"]), st.dictionaries(
    st.sampled_from(["a.b", "c_d", "e-f"]), st.dictionaries(
        st.integers(0, 1000), st.integers(0, 2**62), max_size=4), max_size=3), max_size=2))
def test_a_teardown_with_its_spec_and_offsets_reads_back(
        offsets: dict[str, dict[str, dict[int, int]]]) -> None:
    t = Teardown(OLD, "wc", 1, 2, spec=spec(), offsets=offsets)
    assert Teardown.from_json(t.to_json()) == t and t.state_id == OLD
    kept = teardown("wc-5-5", 50, state_of=OLD)
    assert Teardown.from_json(kept.to_json()) == kept and kept.state_id == OLD


def test_pruning_keeps_the_newest_teardown_of_each_state_that_stays() -> None:
    first, second = teardown("wc-1-1", 10), teardown("wc-2-2", 20, state_of="wc-1-1")
    purged, old = teardown("wc-3-3", 30, purge=True), teardown("x-4-4", 5)
    running = teardown("wc-5-5", 50, done=False)
    gone = prunable([first, second, purged, old, running], keep=0)
    assert {t.id for t in gone} == {"wc-1-1", "wc-3-3"}
    assert prunable([first, second, purged, old, running], keep=4) == []
