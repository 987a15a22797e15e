"""The topology spec as JSON Schema: what the API documents as its submit body (OpenAPI).

Built from the same key sets and limits the spec checks apply
(:mod:`squall.core.topology.checks`), so the two cannot drift apart; what JSON Schema cannot
say (the graph, the grouping fields, a class being importable) the checks say at submit.
"""

from __future__ import annotations

from typing import Any

from squall.core.topology.checks import (
    BOLT_KEYS,
    INPUT_KEYS,
    MAX_NAME,
    SCHEMES,
    SPOUT_KEYS,
    START,
)
from squall.core.topology.grouping import Grouping
from squall.core.topology.model import MAX_PARALLELISM, Guarantee

_NAME = r"^[A-Za-z0-9_-]+$"
_FIELDS = {"type": "array", "items": {"type": "string"}}
_OBJECT = {"type": "object"}


def _name(kind: str) -> dict[str, Any]:
    return {"type": "string", "pattern": _NAME, "minLength": 1, "maxLength": MAX_NAME[kind]}


def _closed(props: dict[str, Any], keys: frozenset[str], required: list[str]
            ) -> dict[str, Any]:
    assert set(props) == set(keys), sorted(set(props) ^ set(keys))
    return {"type": "object", "properties": props, "required": required,
            "additionalProperties": False}


def topology_json_schema() -> dict[str, Any]:
    parallelism = {"type": "integer", "minimum": 1, "maximum": MAX_PARALLELISM}
    spout = _closed({
        "name": _name("component"),
        "topics": {"oneOf": [{"type": "string"}, _FIELDS]},
        "parallelism": parallelism,
        "scheme": {"type": "string", "description": f"{', '.join(SCHEMES)} or module:Class"},
        "fields": _FIELDS,
        "start": {"type": "string", "pattern": START.pattern,
                  "description": "where a partition starts when the spout's group committed "
                                 "nothing in it: earliest (default), latest or group:<id>"}},
        SPOUT_KEYS, ["name", "topics"])
    inp = _closed({
        "component": _name("component"), "stream": _name("stream"),
        "grouping": {"type": "string", "enum": [g.value for g in Grouping]},
        "fields": {**_FIELDS, "description": "the fields a fields or partial_key grouping "
                   "hashes"},
        "class": {"type": "string", "description": "a custom grouping's module:Class (a "
                  "squall.topology.CustomStreamGrouping)"}}, INPUT_KEYS, ["component"])
    bolt = _closed({
        "name": _name("component"),
        "class": {"type": "string", "description": "module:Class"},
        "cls": {"type": "string", "description": "module:Class (same as class)"},
        "parallelism": parallelism,
        "executors": {**parallelism, "description": "Spark tasks running the bolt's tasks "
                      "(at most parallelism; default: one per task)"},
        "inputs": {"type": "array", "items": inp, "minItems": 1},
        "outputs": {"type": "object", "additionalProperties": _FIELDS,
                    "description": "output fields per stream"},
        "config": _OBJECT,
        "persistent_aggregate": _OBJECT, "partition_persist": _OBJECT,
        "state_query": _OBJECT}, BOLT_KEYS, ["name", "inputs"])
    return {
        "title": "Topology", "type": "object", "additionalProperties": False,
        "required": ["name", "spouts"],
        "properties": {
            "name": _name("topology"),
            "spouts": {"type": "array", "items": spout, "minItems": 1},
            "bolts": {"type": "array", "items": bolt},
            "ackers": {"type": "integer", "minimum": 0, "maximum": MAX_PARALLELISM},
            "message_timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": 86400},
            "max_spout_pending": {"type": ["integer", "null"], "minimum": 1},
            "guarantee": {"type": "string", "enum": [g.value for g in Guarantee]},
            "retry": _OBJECT,
            "bolt_deadline_s": {"type": ["number", "null"], "minimum": 0.1, "maximum": 86400},
        },
        "description": "A topology: spouts read Kafka topics, bolts subscribe to "
                       "components (README.md, \"Topologies and bolts\"; docs/trident.md).",
    }
