"""The topology model: builder, JSON / YAML, validation errors that name the culprit."""

from __future__ import annotations

from typing import Any

import pytest

from squall.core.errors import TopologyError
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.grouping import Grouping
from squall.core.topology.model import TopologySpec


def word_count() -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("sentences", "sentences-in", parallelism=2)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 4,
               outputs={"default": ["word"]}).shuffle_grouping("sentences")
    b.set_bolt("count", "examples.wordcount:WordCount", 3,
               outputs={"default": ["word", "count"]}).fields_grouping("split", ["word"])
    return b.build("wc", ackers=2, message_timeout_s=10)


def test_builder_makes_the_seeds_word_count() -> None:
    t = word_count()
    (edge,) = t.edges_from("split")
    assert edge.target == "count"
    assert edge.partitions == 3
    assert edge.grouping is Grouping.FIELDS
    assert edge.fields == ("word",)
    assert edge.topic == "squall.wc.edge.split.default.count"
    assert t.input_topics("split") == ("squall.wc.edge.sentences.default.split",)
    assert t.output_fields("sentences") == ("str",)


def test_json_and_yaml_round_trip() -> None:
    t = word_count()
    assert TopologySpec.from_text(t.to_json()) == t
    yaml_text = """
name: wc
ackers: 2
message_timeout_s: 10
spouts:
  - {name: sentences, topics: sentences-in, parallelism: 2}
bolts:
  - name: split
    class: examples.wordcount:SplitSentence
    parallelism: 4
    outputs: {default: [word]}
    inputs: [{component: sentences}]
  - name: count
    class: examples.wordcount:WordCount
    parallelism: 3
    outputs: {default: [word, count]}
    inputs: [{component: split, grouping: fields, fields: [word]}]
"""
    assert TopologySpec.from_text(yaml_text) == t


def doc(**changes: Any) -> dict[str, Any]:
    d = word_count().to_dict()
    for path, value in changes.items():
        target: Any = d
        keys = path.split("__")
        for k in keys[:-1]:
            target = target[int(k)] if k.isdigit() else target[k]
        last = keys[-1]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return d


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"bolts__1__inputs": [{"component": "split", "grouping": "fields",
                                "fields": ["wrd"]}]},
         "bolt 'count': fields grouping on 'split' by ['wrd'], not among its output fields"),
        ({"bolts__1__inputs": [{"component": "nope"}]},
         "bolt 'count': input from unknown component 'nope'"),
        ({"bolts__1__inputs": [{"component": "split", "stream": "errors"}]},
         "bolt 'count': component 'split' declares no stream 'errors'"),
        ({"bolts__0__cls": "not a class"}, "bolt 'split': class 'not a class' must be"),
        ({"bolts__0__parallelism": 0}, "bolt 'split': parallelism must be 1..1024, got 0"),
        ({"spouts__0__topics": []}, "spout 'sentences': topics must name at least one"),
        ({"bolts__1__name": "split"}, "component names ['split'] are used more than once"),
        ({"name": "bad name"}, "topology name 'bad name' must be letters"),
        ({"ackers": -1}, "ackers must be 0..1024, got -1"),
        ({"ackers": 5000}, "ackers must be 0..1024, got 5000"),
        ({"message_timeout_s": float("nan")}, "message_timeout_s must be in (0, 86400], got nan"),
        ({"bolts__1__inputs": [{"component": "split", "grouping": "sideways"}]},
         "bolt 'count': unknown grouping 'sideways'"),
        ({"spouts": None}, "has no spout"),
        ({"colour": "blue"}, "unknown topology fields ['colour']"),
        ({"retry": {"max_retries": -3}}, "max_retries must be >= 0"),
        ({"guarantee": "maybe"}, "guarantee 'maybe' is not one of"),
        ({"spouts__0__start": "oldest"},
         "spout 'sentences': start 'oldest' is not earliest, latest or group:<consumer group"),
        ({"spouts__0__start": "group:"}, "spout 'sentences': start 'group:' is not"),
        ({"bolt_deadline_s": 0.01}, "bolt_deadline_s must be in [0.1, 86400], got 0.01"),
    ],
)
def test_invalid_specs_name_the_problem(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TopologyError) as e:
        TopologySpec.from_dict(doc(**changes))
    assert message in str(e.value)


def test_garbage_documents_are_topology_errors() -> None:
    for text in ["[1, 2]", "name: [unclosed", "42", "{}"]:
        with pytest.raises(TopologyError):
            TopologySpec.from_text(text)
