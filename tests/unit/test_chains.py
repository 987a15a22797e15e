"""Which bolts run fused into one query."""

from __future__ import annotations

from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.chains import chains, fused_edge
from squall.core.topology.grouping import Grouping
from squall.core.topology.model import BoltSpec, InputSpec, SpoutSpec, TopologySpec


def spec() -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("s", "src")
    b.set_bolt("split", "m:Split", 2, outputs={"default": ["word"]}).shuffle_grouping("s")
    b.set_bolt("count", "m:Count", 3, outputs={"default": ["word", "n"]}) \
        .fields_grouping("split", ["word"])
    b.set_bolt("log", "m:Log", 1, outputs={}).global_grouping("split")
    b.set_bolt("report", "m:Report", 1, outputs={}).global_grouping("count")
    b.set_bolt("join", "m:Join", 1, outputs={}).shuffle_grouping("count") \
        .shuffle_grouping("split")
    return b.build("t")


def test_a_bolt_with_one_bolt_input_runs_in_its_upstreams_query() -> None:
    every = ["split", "count", "log", "report", "join"]
    # split fuses count (the first subscriber); log reads split through Kafka; count fuses
    # report; join has two inputs: a query of its own.
    assert chains(spec(), every) == [("split", "count", "report"), ("log",), ("join",)]


def test_only_bolts_of_this_job_are_fused() -> None:
    assert chains(spec(), ["count", "report"]) == [("count", "report")]
    assert chains(spec(), ["split", "report"]) == [("split",), ("report",)]


def test_fusing_can_be_switched_off() -> None:
    assert chains(spec(), ["split", "count"], fuse=False) == [("split",), ("count",)]


def test_a_cycle_of_bolts_is_not_fused_into_itself() -> None:
    """A spec refuses cycles (squall.core.topology.checks); one built without its checks still
    cannot make chains loop."""
    def bolt(name: str, up: str) -> BoltSpec:
        return BoltSpec(name, f"m:{name.upper()}", 1, (InputSpec(up),), {"default": ("x",)})

    spec = TopologySpec("cyc", (SpoutSpec("s", ("src",)),),
                        (bolt("a", "b"), bolt("b", "a"), bolt("c", "s")))
    got = chains(spec, ["a", "b", "c"])
    assert sorted(n for c in got for n in c) == ["a", "b", "c"]  # each exactly once
    assert all(len(c) <= 2 for c in got)


def test_the_fused_edge_keeps_its_grouping() -> None:
    e = fused_edge(spec(), "split", "count")
    assert (e.target, e.partitions, e.grouping, e.fields) == ("count", 3, Grouping.FIELDS,
                                                              ("word",))


def test_a_persistent_aggregate_fuses_into_its_upstream_query() -> None:
    """Its txids are its tasks' own, so it may run in the upstream bolt's micro-batch."""
    b = TopologyBuilder()
    b.set_spout("s", "t")
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("s")
    b.persistent_aggregate("count", ["word"], "count", 2).fields_grouping("split", ["word"])
    spec = b.build("exact")
    assert chains(spec, ["split", "count"]) == [("split", "count")]
