"""The ACLs a topology needs (squall/core/control/kafka_acls.py), and a refusal named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.kafka_acls import (
    Acl,
    Operation,
    Pattern,
    Resource,
    owned_prefix,
    refusal,
    topology_acls,
    unknown_sinks,
)
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import (
    acker_topic,
    dlq_topic,
    edge_topic,
    results_topic,
    spout_group,
)


def spec(name: str = "wc", once: bool = True, start: str = "earliest") -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout("s", ["in-a", "in-b"], 2, scheme="text", start=start)
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping("s")
    b.kafka_bolt("out", "words", 2, message_field="word", exactly_once=once
                 ).fields_grouping("split", ["word"])
    b.kafka_bolt("routed", None, 1, topic_field="word", message_field="word"
                 ).shuffle_grouping("split")
    return b.build(name, ackers=2)


def allowed(acls: list[Acl], res: Resource, name: str, op: Operation) -> bool:
    """Whether one of ``acls`` lets ``op`` on the resource named ``name``."""
    return any(a.resource is res and a.operation is op and (
        a.name == name if a.pattern is Pattern.LITERAL else name.startswith(a.name))
        for a in acls)


@given(st.from_regex(r"[a-z][a-z0-9_-]{0,12}", fullmatch=True),
       st.from_regex(r"[0-9]{1,3}-[0-9]{10}", fullmatch=True))
def test_every_internal_topic_and_group_of_every_submission_is_covered(name: str,
                                                                       tail: str) -> None:
    acls = topology_acls(spec(name))
    tid = f"{name}-{tail}"  # a submission's id
    for t in (acker_topic(tid), results_topic(tid), dlq_topic(tid),
              edge_topic(tid, "s", "default", "split")):
        for op in (Operation.CREATE, Operation.DESCRIBE, Operation.READ, Operation.WRITE):
            assert allowed(acls, Resource.TOPIC, t, op), (t, op)
    for g in (spout_group(tid, "s"), f"squall.{tid}.acker", "squall-read-1a2b"):
        assert allowed(acls, Resource.GROUP, g, Operation.READ), g


def test_sources_sinks_and_nothing_else() -> None:
    acls = topology_acls(spec())
    for t in ("in-a", "in-b"):
        assert allowed(acls, Resource.TOPIC, t, Operation.READ)
        assert allowed(acls, Resource.TOPIC, t, Operation.WRITE)  # replays
        assert not allowed(acls, Resource.TOPIC, t, Operation.CREATE)
    assert allowed(acls, Resource.TOPIC, "words", Operation.WRITE)
    assert allowed(acls, Resource.TOPIC, "words", Operation.READ)  # exactly once
    assert not allowed(topology_acls(spec(once=False)), Resource.TOPIC, "words",
                       Operation.READ)
    # nothing of another topology, nor any other topic
    assert not allowed(acls, Resource.TOPIC, acker_topic("other"), Operation.WRITE)
    assert not allowed(acls, Resource.TOPIC, "__consumer_offsets", Operation.READ)
    prefixed = {a.name for a in acls if a.pattern is Pattern.PREFIXED}
    assert prefixed == {owned_prefix("wc"), "squall-"}
    assert len(acls) == len(set(acls))
    assert unknown_sinks(spec()) == ["routed"]


def test_a_spout_starting_from_another_group_may_describe_it() -> None:
    acls = topology_acls(spec(start="group:legacy-app"))
    assert allowed(acls, Resource.GROUP, "legacy-app", Operation.DESCRIBE)
    assert not allowed(acls, Resource.GROUP, "legacy-app", Operation.READ)


def test_a_command_grants_one_acl() -> None:
    a = next(a for a in topology_acls(spec()) if a.name == "in-a"
             and a.operation is Operation.READ)
    assert a.command("User:squall", "k:9093") == (
        "kafka-acls.sh --bootstrap-server k:9093 --add --allow-principal User:squall "
        "--operation Read --topic in-a --resource-pattern-type literal")


def test_a_refusal_names_the_operation_the_resource_and_what_to_do() -> None:
    e = refusal("TOPIC_AUTHORIZATION_FAILED", Operation.WRITE, "squall.wc.acker",
                "writing results")
    assert e is not None
    msg = str(e)
    assert "Write topic 'squall.wc.acker'" in msg and "TOPIC_AUTHORIZATION_FAILED" in msg
    assert "squall acls" in msg
    g = refusal("GROUP_AUTHORIZATION_FAILED", Operation.READ, "squall.wc.s", "committing")
    assert g is not None and "Read group 'squall.wc.s'" in str(g)
    assert refusal("_TRANSPORT", Operation.READ, "x", "reading") is None


def test_the_cli_prints_the_grants_of_a_topology_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from squall.cli import build_parser

    f = tmp_path / "wc.json"
    f.write_text(spec("orders").to_json())
    args = build_parser().parse_args(["acls", str(f), "--principal", "User:ops",
                                      "--bootstrap-server", "k1:9093"])
    assert args.func(args) == 0
    out, err = capsys.readouterr()
    commands = [line for line in out.splitlines() if line.startswith("kafka-acls.sh")]
    assert len(commands) == len(topology_acls(spec("orders")))
    assert all("--allow-principal User:ops" in c and "k1:9093" in c for c in commands)
    assert any("--topic squall.orders --resource-pattern-type prefixed" in c for c in commands)
    assert "'routed' picks its topics from a field" in err
    args = build_parser().parse_args(["acls", str(f), "-o", "json"])
    assert args.func(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["operation"] for r in rows} == {"Create", "Describe", "Read", "Write"}
