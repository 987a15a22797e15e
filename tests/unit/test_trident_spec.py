"""persistent_aggregate in topologies: YAML, the builder, a round trip, and bad specs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from squall.core.errors import TopologyError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import BoltSpec, TopologySpec
from squall.core.topology.trident import CLASS, AggregateSpec
from squall.core.trident.codec import MapKind

YAML = """
name: exact
spouts: [{name: sentences, topics: sentences}]
bolts:
  - name: split
    class: examples.wordcount:SplitSentence
    outputs: {default: [word]}
    inputs: [{component: sentences}]
  - name: count
    parallelism: 2
    persistent_aggregate:
      group_by: [word]
      aggregator: count
      state: {kind: transactional, cache_size: 100}
    inputs: [{component: split, grouping: fields, fields: [word]}]
"""


def test_yaml_and_the_builder_give_the_same_spec_which_round_trips() -> None:
    spec = TopologySpec.from_text(YAML)
    count = spec.component("count")
    assert isinstance(count, BoltSpec)
    assert count.cls == CLASS
    assert count.outputs == {"default": ("word", "count")}
    agg = AggregateSpec.from_config(count.config, "count")
    assert (agg.group_by, agg.state.kind, agg.state.cache_size) == (
        ("word",), MapKind.TRANSACTIONAL, 100)
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences")
    b.set_bolt("split", "examples.wordcount:SplitSentence",
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.persistent_aggregate("count", ["word"], "count", 2, kind="transactional",
                           cache_size=100).fields_grouping("split", ["word"])
    assert b.build("exact") == spec
    assert TopologySpec.from_text(spec.to_json()) == spec


def _with(change: dict[str, Any]) -> str:
    doc = yaml.safe_load(YAML)
    doc["bolts"][1].update(change)
    return yaml.safe_dump(doc)


@pytest.mark.parametrize(("change", "needle"), [
    ({"persistent_aggregate": {"group_by": ["word"], "agregator": "count"}},
     "unknown persistent_aggregate keys ['agregator']"),
    ({"persistent_aggregate": {"group_by": ["word"], "state": {"knd": "opaque"}}},
     "unknown state keys ['knd']"),
    ({"persistent_aggregate": {"group_by": ["word"], "state": {"kind": "exactly"}}},
     "state kind 'exactly' is not one of"),
    ({"persistent_aggregate": {"group_by": ["word"], "aggregator": "no.such:Agg"}},
     "aggregator 'no.such:Agg' cannot be loaded"),
    ({"persistent_aggregate": {"group_by": ["word"], "aggregator": "sum"}},
     "the sum aggregator needs one input field"),
    ({"persistent_aggregate": {"group_by": ["word"]},
      "inputs": [{"component": "split", "grouping": "shuffle"}]},
     "must be grouped by fields ['word']"),
    ({"persistent_aggregate": {"group_by": ["colour"]},
      "inputs": [{"component": "split", "grouping": "fields", "fields": ["colour"]}]},
     "fields ['colour'] are not among 'split''s output fields ['word']"),
    ({"class": "x:Y"}, "persistent_aggregate takes no ['class']"),
])
def test_bad_aggregates_say_what_and_where(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(TopologyError, match=r"bolt 'count'.*" + re.escape(needle)):
        TopologySpec.from_text(_with(change))


@pytest.mark.parametrize("path", sorted(Path("examples").glob("*.yaml")), ids=str)
def test_every_example_topology_is_valid(path: Path) -> None:
    spec = TopologySpec.from_text(path.read_text())
    assert TopologySpec.from_text(spec.to_json()) == spec


LEDGER = Path("examples/ledger.yaml")


def _ledger(bolt: int, change: dict[str, Any], drop: str = "") -> str:
    doc = yaml.safe_load(LEDGER.read_text())
    if drop:
        del doc["bolts"][bolt][drop]
    doc["bolts"][bolt].update(change)
    return yaml.safe_dump(doc)


def test_partition_persist_and_state_query_from_yaml_and_the_builder_agree() -> None:
    spec = TopologySpec.from_text(LEDGER.read_text())
    b = TopologyBuilder()
    b.set_spout("payments", "payments", scheme="json", fields=["account", "amount"])
    b.set_spout("lookups", "lookups", scheme="json", fields=["account"])
    b.partition_persist("balances", "examples.ledger:AddToBalance", ["account"],
                        ["account", "amount"], ["account", "balance"], 2
                        ).fields_grouping("payments", ["account"])
    b.state_query("lookup", "balances", ["account"], output="balance", parallelism=2
                  ).shuffle_grouping("lookups")
    built = b.build("ledger", ackers=1)
    assert built.bolts == spec.bolts
    assert spec.component("lookup").outputs == {"default": ("account", "balance")}


@pytest.mark.parametrize(("bolt", "change", "drop", "needle"), [
    (0, {"partition_persist": {"group_by": ["account"], "fields": ["account"]}},
     "partition_persist", "bolt 'balances': partition_persist needs an updater"),
    (0, {"partition_persist": {"group_by": ["account"], "updater": "examples.ledger:Nope"}},
     "partition_persist", "updater 'examples.ledger:Nope' cannot be loaded"),
    (0, {"partition_persist": {"group_by": ["account"], "updater": "collections:Counter"}},
     "partition_persist", "has no update_state(state, tuples, collector)"),
    (0, {"partition_persist": {"group_by": ["account"], "updater":
                               "examples.ledger:AddToBalance", "output": "x"}},
     "partition_persist", "unknown partition_persist keys ['output']"),
    (0, {"inputs": [{"component": "payments", "grouping": "shuffle"}]}, "",
     "bolt 'balances': input from 'payments' must be grouped by fields ['account']"),
    (1, {"state_query": {"state": "payments", "key": ["account"]}}, "state_query",
     "bolt 'lookup': state 'payments' is not a persistent_aggregate or partition_persist"),
    (1, {"state_query": {"state": "balances", "key": ["user"]}}, "state_query",
     "bolt 'lookup': fields ['user'] are not among 'lookups''s output fields"),
    (1, {"state_query": {"state": "balances", "key": ["account"], "function": "os:getcwd"}},
     "state_query", "function 'os:getcwd' has no batch_retrieve(state, keys)"),
    (1, {"class": "x:Y"}, "", "state_query takes no ['class']"),
])
def test_bad_persists_and_queries_say_what_and_where(bolt: int, change: dict[str, Any],
                                                     drop: str, needle: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(needle)):
        TopologySpec.from_text(_ledger(bolt, change, drop))
