"""Specs that cannot run, or that attack the reader, are refused with what and where."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from squall.core.errors import TopologyError
from squall.core.topology.checks import MAX_SPEC_BYTES, check_graph
from squall.core.topology.model import TopologySpec
from squall.core.topology.schema import topology_json_schema


def spec(**change: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "wc",
        "spouts": [{"name": "sentences", "topics": "sentences"}],
        "bolts": [
            {"name": "split", "class": "examples.wordcount:SplitSentence",
             "outputs": {"default": ["word"]}, "inputs": [{"component": "sentences"}]},
            {"name": "count", "class": "examples.wordcount:WordCount",
             "outputs": {"default": ["word", "count"]},
             "inputs": [{"component": "split", "grouping": "fields", "fields": ["word"]}]},
        ]}
    doc.update(change)
    return doc


def refused(doc: Any, needle: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(needle)):
        TopologySpec.from_dict(doc)


def test_the_sound_spec_is_taken() -> None:
    assert TopologySpec.from_dict(spec()).name == "wc"


@pytest.mark.parametrize(("where", "key", "needle"), [
    ("spouts", "paralelism", "spout 'sentences': unknown keys ['paralelism']"),
    ("spouts", "schema", "spout 'sentences': unknown keys ['schema']"),
    ("bolts", "paralelism", "bolt 'split': unknown keys ['paralelism']"),
])
def test_misspelled_keys_inside_a_component_are_named(where: str, key: str, needle: str
                                                      ) -> None:
    doc = spec()
    doc[where][0][key] = 4
    refused(doc, needle)


def test_a_misspelled_input_key_is_named() -> None:
    doc = spec()
    doc["bolts"][1]["inputs"][0]["feilds"] = ["word"]
    refused(doc, "bolt 'count' input: unknown keys ['feilds']")


def test_a_cycle_and_a_self_loop_are_refused_with_their_path() -> None:
    doc = spec()
    doc["bolts"][0]["inputs"] = [{"component": "count"}]
    refused(doc, "the bolts form a cycle: split <- count <- split")
    doc = spec()
    doc["bolts"][0]["inputs"] = [{"component": "split"}]
    refused(doc, "the bolts form a cycle: split <- split")


def test_bolts_no_spout_reaches_are_named() -> None:
    with pytest.raises(TopologyError, match=re.escape("bolts ['a', 'b'] are reached from no "
                                                      "spout")):
        check_graph(["s"], {"a": ["b"], "b": [], "c": ["s"], "d": ["c"]})


@pytest.mark.parametrize(("topic", "ok"), [("sentences", True), ("a.b-c_d", True),
                                           ("has space", False), ("..", False),
                                           ("x" * 250, False), ("ünï", False)])
def test_topic_names_follow_kafkas_rules(topic: str, ok: bool) -> None:
    doc = spec(spouts=[{"name": "sentences", "topics": [topic]}])
    if ok:
        TopologySpec.from_dict(doc)
    else:
        refused(doc, "spout 'sentences': topic")


def test_an_unknown_scheme_is_refused() -> None:
    refused(spec(spouts=[{"name": "sentences", "topics": "s", "scheme": "avro"}]),
            "scheme 'avro' is not one of text, raw, json or a 'module:Class'")


def test_names_that_would_not_fit_a_topic_or_a_route_are_refused() -> None:
    refused(spec(name="t" * 250), "topology name 'tttttttttttttttttttt'... is 250 characters; "
                                  "at most 64")
    doc = spec()
    doc["bolts"][1]["name"] = "c" * 49
    refused(doc, "component name")


def test_hostile_text_is_refused_before_it_costs_anything() -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
        for i in range(9))
    with pytest.raises(TopologyError, match="more than 64 YAML aliases"):
        TopologySpec.from_text(bomb)
    # Few aliases, each naming the one before nine times: 9**7 values if walked.
    nested = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
        for i in range(6))
    with pytest.raises(TopologyError, match="more than 200,000 values"):
        TopologySpec.from_text(nested)
    with pytest.raises(TopologyError, match="nests deeper than 32 levels"):
        TopologySpec.from_text("[" * 100_000 + "]" * 100_000)
    doc = spec()
    doc["bolts"][0]["config"] = {"deep": json.loads("[" * 40 + "]" * 40)}
    with pytest.raises(TopologyError, match="nests deeper than 32 levels"):
        TopologySpec.from_dict(doc)
    with pytest.raises(TopologyError, match=f"at most {MAX_SPEC_BYTES:,} are read"):
        TopologySpec.from_text("name: x\n#" + "x" * MAX_SPEC_BYTES)


@pytest.mark.parametrize("path", sorted(Path("examples").glob("*.yaml")), ids=str)
def test_every_example_fits_the_documented_schema(path: Path) -> None:
    """The submit body's schema (OpenAPI) takes what the spec takes."""
    jsonschema.validate(yaml.safe_load(path.read_text()), topology_json_schema())
    jsonschema.validate(TopologySpec.from_text(path.read_text()).to_dict(),
                        topology_json_schema())


def test_the_schema_refuses_a_misspelled_key_as_the_spec_does() -> None:
    doc = spec()
    doc["spouts"][0]["paralelism"] = 2
    with pytest.raises(jsonschema.ValidationError, match="paralelism"):
        jsonschema.validate(doc, topology_json_schema())


def test_a_misspelled_retry_setting_is_named() -> None:
    refused(spec(retry={"initail_ms": 5}), "retry: unknown keys ['initail_ms']")
