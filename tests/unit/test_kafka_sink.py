"""The Kafka sink's pure parts: its configuration checked at submit, what a tuple becomes,
Kafka's murmur2 partitioner, and what an exactly-once task keeps of what it wrote."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.bolt_api.state import KeyValueState
from squall.core.errors import TopologyError
from squall.core.reliability.tuples import Tuple
from squall.core.tasks.sink_written import Intent, Written
from squall.core.topology import kafka_sink as k
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec


def spec(config: dict[str, Any], grouping: str = "fields", parallelism: int = 2,
         outputs: dict[str, list[str]] | None = None) -> TopologySpec:
    return TopologySpec.from_dict({
        "name": "k",
        "spouts": [{"name": "src", "topics": ["t"], "scheme": "json",
                    "fields": ["word", "n", "dest"]}],
        "bolts": [{"name": "out", "class": k.KAFKA_BOLT, "config": config,
                   "parallelism": parallelism, "outputs": outputs or {},
                   "inputs": [{"component": "src", "grouping": grouping,
                               **({"fields": ["word"]} if grouping == "fields" else {})}]}]})


@pytest.mark.parametrize(("config", "error"), [
    ({}, "needs topic or topic.field"),
    ({"topic": "t-out", "message.field": "n", "acks": "all"}, r"takes no \['acks'\]"),
    ({"topic": "", "message.field": "n"}, "topic must be a non-empty string"),
    ({"topic": "bad topic", "message.field": "n"}, "bad topic"),
    ({"topic": "o", "message.field": "n", "exactly.once": "yes"}, "true or false"),
    ({"topic": "o", "message.field": "n", "producer": {"acks": ["all"]}}, "librdkafka"),
    ({"topic": "o"}, r"input src/default has no fields \['message'\]"),
    ({"topic": "o", "message.field": "n", "key.field": "who"}, r"no fields \['who'\]"),
    ({"topic.field": "where", "message.field": "n"}, r"no fields \['where'\]"),
])
def test_a_bad_sink_is_refused_at_submit_naming_the_key(config: dict[str, Any],
                                                        error: str) -> None:
    with pytest.raises(TopologyError, match=f"bolt 'out': .*{error}"):
        spec(config)


def test_exactly_once_needs_a_replay_to_come_back_to_the_same_task() -> None:
    ok = {"topic": "o", "message.field": "n", "exactly.once": True}
    spec(ok)
    spec(ok, "global")
    spec(ok, "shuffle", parallelism=1)
    with pytest.raises(TopologyError, match="input src/default is shuffle"):
        spec(ok, "shuffle")
    spec({"topic": "o", "message.field": "n"}, "shuffle")  # at least once: any grouping
    with pytest.raises(TopologyError, match="emits nothing"):
        spec({"topic": "o", "message.field": "n"}, outputs={"default": ["x"]})


def test_the_builder_and_a_spec_say_the_same() -> None:
    b = TopologyBuilder()
    b.set_spout("src", "t", scheme="json", fields=["word", "n", "dest"])
    b.kafka_bolt("out", "o", 2, key_field="word", message_field="n", exactly_once=True,
                 producer={"compression.type": "lz4"}).fields_grouping("src", ["word"])
    built = b.build("k")
    assert built == spec({"topic": "o", "key.field": "word", "message.field": "n",
                          "exactly.once": True, "producer": {"compression.type": "lz4"}})
    assert TopologySpec.from_dict(built.to_dict()) == built


def test_a_tuple_becomes_a_record_keyed_and_encoded_with_its_place_as_id() -> None:
    s = k.sink_of({"topic": "o", "topic.field": "dest", "key.field": "word",
                   "message.field": "n"}, "here")
    t = Tuple(["fox", {"a": [1, 2]}, ""], ("word", "n", "dest"), {1: 2}, source="split",
              origin=("src:1", 42), emitted_by=7, nth=3)
    rec = k.record_of(s, t)
    assert (rec.topic, rec.key, rec.value) == ("o", b"fox", b'{"a":[1,2]}')
    assert rec.id == f"split/default/src:1@42/{t.path:016x}"
    to = Tuple(["fox", 3, "elsewhere"], ("word", "n", "dest"), origin=("src:1", 42))
    assert k.record_of(s, to).topic == "elsewhere"
    assert k.record_of(s, Tuple([b"raw", None, None], ("word", "n", "dest"))).value is None
    assert k.record_of(s, Tuple([b"raw", 1, None], ("word", "n", "dest"))).id is None
    with pytest.raises(ValueError, match="set value"):
        k.record_of(s, Tuple(["w", {1, 2}, None], ("word", "n", "dest")))
    with pytest.raises(ValueError, match="names topic 5"):
        k.record_of(s, Tuple(["w", 1, 5], ("word", "n", "dest")))


@pytest.mark.parametrize(("key", "hashed", "of7"), [
    # Kafka's Java client and librdkafka's murmur2 partitioner agree with these
    (b"", 275646681, 2), (b"a", -1563381124, 5), (b"ab", 316155434, 0),
    (b"abc", 479470107, 4), (b"abcd", -1323649548, 5), (b"hello world", 1221641059, 2),
    (b"squall", 1057278353, 5)])
def test_murmur2_is_kafkas(key: bytes, hashed: int, of7: int) -> None:
    assert k.murmur2(key) == hashed
    assert k.murmur2_partition(key, 7) == of7


@given(st.binary(max_size=64), st.integers(1, 1000))
def test_a_partition_is_in_range(key: bytes, n: int) -> None:
    assert 0 <= k.murmur2_partition(key, n) < n


def test_what_was_written_is_kept_until_its_source_message_is_committed() -> None:
    state = KeyValueState()
    w = Written(state)
    w.record("a", Intent("o", 0, 10, "src:0", 5))
    w.record("b", Intent("o", 1, 3, "src:1", 9))
    assert set(w.recorded(["a", "b", "c"])) == {"a", "b"}
    assert w.forget_below({"src:0": 6, "src:1": 9}) == 1
    assert set(w.recorded(["a", "b"])) == {"b"}
    state.changes()
    restored = KeyValueState(state.snapshot())  # another worker, from the database
    assert Written(restored).recorded(["b"])["b"].start == 3
