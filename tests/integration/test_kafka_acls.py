"""Squall on a secured Apache Kafka (docs/kafka.md, "ACLs"): SASL SCRAM-SHA-512 over TLS and
the StandardAuthorizer. Every process of a topology works with exactly the ACLs
``squall acls`` lists; a principal with one of them missing is stopped by an error that
names the operation and the resource; a principal outside the set can neither write to
the topology's internal topics nor read its dead letters. The broker is a node of its own
(tests/integration/secure_kafka.py)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from squall.core.control.kafka_acls import Acl, Operation, Pattern, Resource, topology_acls
from squall.core.topology.builder import TopologyBuilder
from squall.core.topology.model import TopologySpec
from squall.core.topology.topics import acker_topic, dlq_topic
from squall.kafka import ensure_topics
from tests.integration.helpers import (
    committed_offsets,
    produce_source,
    topology_services,
    wait_for,
    wait_for_queries,
)
from tests.integration.secure_kafka import SecureKafka, secure_kafka

pytestmark = pytest.mark.integration

SOURCE, SINK, PARTS = "acl-sentences", "acl-words", 2


def bindings(acls: Iterable[Acl], principal: str) -> list[Any]:
    from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kinds = {Resource.TOPIC: ResourceType.TOPIC, Resource.GROUP: ResourceType.GROUP}
    patterns = {Pattern.LITERAL: ResourcePatternType.LITERAL,
                Pattern.PREFIXED: ResourcePatternType.PREFIXED}
    return [AclBinding(kinds[a.resource], a.name, patterns[a.pattern], principal, "*",
                       AclOperation[a.operation.name], AclPermissionType.ALLOW)
            for a in acls]


def word_count(name: str) -> TopologySpec:
    b = TopologyBuilder()
    b.set_spout(SOURCE, [SOURCE], 1, scheme="text")
    b.set_bolt("split", "examples.wordcount:SplitSentence", 2,
               outputs={"default": ["word"]}).shuffle_grouping(SOURCE)
    b.kafka_bolt("words", SINK, 2, message_field="word", exactly_once=True
                 ).fields_grouping("split", ["word"])
    return b.build(name, ackers=1)


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    with secure_kafka(tmp_path_factory.mktemp("secure-kafka"), plain_users=("reader",)) as k:
        ensure_topics(k.clients(k.admin_env()), {SOURCE: PARTS, SINK: 2})  # the operator's
        yield k


def test_a_topology_runs_with_exactly_its_acls_and_an_outsider_gets_nothing(
        kafka: SecureKafka, tmp_path: Path) -> None:
    spec = word_count(f"acl{uuid.uuid4().hex[:6]}")
    password = kafka.add_scram_user("squall")
    kafka.grant(bindings(topology_acls(spec), "User:squall"))
    env = kafka.scram_env("squall", password)
    admin = kafka.clients(kafka.admin_env())
    lines = [f"the quick brown fox {i % 5} jumps" .encode() for i in range(200)]
    acker, spout, bolts = topology_services(spec, kafka.bootstrap("SASL_SSL"), tmp_path,
                                            env=env)
    with acker.start(), bolts.start():
        wait_for_queries(bolts)
        produce_source(admin, SOURCE, lines, PARTS)
        group = f"squall.{spec.name}.{SOURCE}"
        with spout.start():
            wait_for(lambda: sum(max(0, o) for o in committed_offsets(admin, group, SOURCE, PARTS))
                     >= len(lines) or not (bolts.alive() and spout.alive()), 240,
                     "every sentence committed")
            assert bolts.alive(), bolts.log_tail()
            assert spout.alive(), spout.log_tail()
    words = Counter(m.value().decode() for m in read_all(admin, SINK, 2))
    assert words == Counter(w for s in lines for w in s.decode().split())

    # An authenticated principal with no ACLs, over SCRAM on plaintext: it may not forge an
    # ack (which would complete a tree that never ran) nor read the dead letters.
    outsider = kafka.clients(kafka.scram_env("outsider", kafka.add_scram_user("outsider"),
                                             "SASL_PLAINTEXT"))
    delivered: list[Any] = []
    p = outsider.producer({"message.timeout.ms": 15_000})
    p.produce(acker_topic(spec.name), b"forged", partition=0,
              on_delivery=lambda err, _m: delivered.append(err))
    p.flush(30)
    assert len(delivered) == 1 and delivered[0] is not None \
        and delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, delivered
    letter = admin.producer()
    letter.produce(dlq_topic(spec.name), b"a dead letter's payload", partition=0)
    assert letter.flush(30) == 0
    # A group of its own, so that what refuses it is the topic alone.
    kafka.grant(bindings([Acl(Resource.GROUP, Pattern.PREFIXED, "squall-peek", op, "its own")
                          for op in (Operation.DESCRIBE, Operation.READ)], "User:outsider"))
    c = outsider.consumer({"group.id": f"squall-peek-{uuid.uuid4().hex[:6]}",
                           "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(dlq_topic(spec.name), 0, 0)])
        got = poll_until_refused(c)
    finally:
        c.close()
    assert [m for m in got if m.error() is None] == []
    seen = outsider.metadata(10, dlq_topic(spec.name)).topics[dlq_topic(spec.name)]
    assert seen.error is not None \
        and seen.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, seen.error


def test_a_missing_acl_stops_the_process_naming_the_operation_and_the_resource(
        kafka: SecureKafka, tmp_path: Path) -> None:
    spec = word_count(f"half{uuid.uuid4().hex[:6]}")
    password = kafka.add_scram_user("half")
    kafka.grant(bindings([a for a in topology_acls(spec)
                          if not (a.name == SOURCE and a.operation is Operation.READ)],
                         "User:half"))
    _, spout, _ = topology_services(spec, kafka.bootstrap("SASL_SSL"), tmp_path,
                                    env=kafka.scram_env("half", password))
    produce_source(kafka.clients(kafka.admin_env()), SOURCE, [b"a b c"], PARTS)
    spout.start()
    assert spout.wait(120) == 2, spout.log_tail()
    said = [line for line in spout.log_tail(200).splitlines()
            if line.startswith("squall spout: error:")]
    assert len(said) == 1 and f"Read topic '{SOURCE}'" in said[0] \
        and "TOPIC_AUTHORIZATION_FAILED" in said[0] and "squall acls" in said[0], said
    assert password not in spout.log_tail(400)


def test_plain_over_tls_authenticates_and_a_wrong_password_is_told_why(
        kafka: SecureKafka) -> None:
    from squall.core.errors import KafkaUnavailable
    from squall.core.topology.topics import HEALTH_TOPIC
    from squall.dev.probes import kafka_round_trip

    env = kafka.plain_env("reader")
    kafka.grant(bindings([Acl(Resource.TOPIC, Pattern.LITERAL, HEALTH_TOPIC, op, "probe")
                          for op in (Operation.DESCRIBE, Operation.READ, Operation.WRITE)]
                         + [Acl(Resource.GROUP, Pattern.PREFIXED, "squall-health", op, "probe")
                            for op in (Operation.DESCRIBE, Operation.READ)], "User:reader"))
    assert kafka_round_trip(kafka.clients(env), timeout_s=30)
    wrong = {**env, "SQUALL_KAFKA_SASL_PASSWORD": "not-the-password"}
    with pytest.raises(KafkaUnavailable, match=r"sasl\.password") as e:
        kafka.clients(wrong).metadata(10)
    assert "not-the-password" not in str(e.value)


def read_all(kafka: Any, topic: str, partitions: int) -> list[Any]:
    c = kafka.consumer({"group.id": f"squall-check-{uuid.uuid4().hex[:6]}",
                        "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out, ended = [], set()
        for _ in range(200):
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(m)
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(m.partition())
            if len(ended) == partitions:
                break
        return out
    finally:
        c.close()


def poll_until_refused(c: Any, polls: int = 30) -> list[Any]:
    out: list[Any] = []
    for _ in range(polls):
        out += c.consume(100, 0.5)
        if any(m.error() is not None and m.error().code() ==
               KafkaError.TOPIC_AUTHORIZATION_FAILED for m in out):
            break
    return out
