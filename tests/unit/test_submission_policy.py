"""What a submission may carry: classes from allowed modules only (Squall's own always), a
Kafka sink that tunes its producer and no more, and no secret anywhere; each refusal names
the place and never a secret's value."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.errors import ConfigError, TopologyError
from squall.core.topology.code_policy import (
    DEFAULT,
    allowed_modules,
    check_code,
    code_refs,
    may_run,
)
from squall.core.topology.kafka_sink import KAFKA_BOLT
from squall.core.topology.model import TopologySpec
from squall.core.topology.spec_secrets import check_no_secrets


def topology(bolt_cls: str = "examples.wordcount:SplitSentence", **extra: Any) -> TopologySpec:
    doc: dict[str, Any] = {
        "name": "p", "spouts": [{"name": "s", "topics": ["t"], **extra.pop("spout", {})}],
        "bolts": [{"name": "b", "class": bolt_cls,
                   "inputs": [{"component": "s", **extra.pop("input", {})}],
                   **extra}]}
    return TopologySpec.from_dict(doc).validate()


def test_the_examples_and_squalls_own_run_by_default_and_nothing_else() -> None:
    check_code(topology(), DEFAULT)
    with pytest.raises(TopologyError, match=r"bolt 'b': 'os:system' is not in a module .*"
                                            r"allowed: examples.*SQUALL_ALLOWED_MODULES"):
        check_code(topology("os:system"), DEFAULT)
    assert may_run(KAFKA_BOLT, ())


def test_every_class_a_spec_names_is_checked() -> None:
    spec = TopologySpec.from_dict({
        "name": "p", "spouts": [{"name": "s", "topics": ["t"], "scheme": "evil.scheme:S"}],
        "bolts": [{"name": "a", "class": "examples.wordcount:SplitSentence",
                   "inputs": [{"component": "s"}], "outputs": {"default": ["word"]}},
                  {"name": "b", "class": "examples.wordcount:WordCount",
                   "inputs": [{"component": "a", "grouping": "custom",
                               "class": "evil.grouping:G"}]}]})
    assert [p for _, p in code_refs(spec)] == [
        "evil.scheme:S", "examples.wordcount:SplitSentence", "examples.wordcount:WordCount",
        "evil.grouping:G"]
    with pytest.raises(TopologyError, match=r"spout 's' scheme: 'evil\.scheme:S'"):
        check_code(spec, DEFAULT)


@given(st.sampled_from(["examples", "mycompany.topologies"]),
       st.sampled_from(["", ".sub", "evil", "_x", ".sub.deeper"]))
def test_a_module_is_allowed_with_those_under_it_and_no_name_that_merely_starts_alike(
        allowed: str, tail: str) -> None:
    expect = tail == "" or tail.startswith(".")
    assert may_run(f"{allowed}{tail}:C", (allowed,)) is expect


def test_the_setting_is_module_names() -> None:
    assert allowed_modules(None) == DEFAULT
    assert allowed_modules(" examples , mycompany.topologies ,") == (
        "examples", "mycompany.topologies")
    with pytest.raises(ConfigError, match="SQUALL_ALLOWED_MODULES"):
        allowed_modules("examples,os/../x")


@pytest.mark.parametrize("props", [
    {"bootstrap.servers": "evil:9092"}, {"sasl.password": "hunter2-hunter2"},
    {"plugin.library.paths": "/tmp/evil.so"}, {"sasl.kerberos.kinit.cmd": "sh -c id"},
    {"security.protocol": "PLAINTEXT"}, {"enable.idempotence": False}])
def test_a_sink_tunes_its_producer_and_no_more(props: dict[str, Any]) -> None:
    with pytest.raises(TopologyError, match="producer may not set") as got:
        topology(KAFKA_BOLT, config={"topic": "out", "message.field": "str",
                                     "producer": props},
                 input={"grouping": "shuffle"})
    assert all(str(v) not in str(got.value) for v in props.values())
    topology(KAFKA_BOLT, config={"topic": "out", "message.field": "str",
                                 "producer": {"linger.ms": 20, "compression.type": "lz4"}},
             input={"grouping": "shuffle"})


@pytest.mark.parametrize(("doc", "where"), [
    ({"bolts": [{"config": {"state": {"url": "postgresql://u:hunter2@db/x"}}}]},
     r"spec.bolts\[0\].config.state.url"),
    ({"bolts": [{"config": {"api.key": "k-hunter2"}}]}, r"spec.bolts\[0\].config.api.key"),
    ({"bolts": [{"config": {"db_password": "hunter2"}}]}, "db_password"),
    ({"spouts": [{"x": ["ok", "redis://:hunter2@cache:6379"]}]}, r"spouts\[0\].x\[1\]"),
])
def test_a_secret_in_a_spec_is_refused_naming_where_and_never_what(doc: dict[str, Any],
                                                                   where: str) -> None:
    with pytest.raises(TopologyError, match=where) as got:
        check_no_secrets(doc)
    assert "hunter2" not in str(got.value)


@pytest.mark.parametrize("doc", [
    {"bolts": [{"config": {"state": {"url": "postgresql://u@db/x"}}}]},
    {"bolts": [{"config": {"tokenizer": "words", "password": ""}}]},
    {"spouts": [{"topics": ["http://example.com/a:b@c"]}]},
])
def test_what_is_no_secret_passes(doc: dict[str, Any]) -> None:
    check_no_secrets(doc)


def test_the_api_and_the_workers_read_the_same_variable(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    from services.api.settings import parse_args as api_args
    from services.worker.settings import parse_args as worker_args

    monkeypatch.setenv("SQUALL_API_TOKEN", "a" * 32)
    monkeypatch.delenv("SQUALL_ALLOWED_MODULES", raising=False)
    assert api_args([]).allowed_modules == worker_args(["--kind", "acker"]).allowed_modules \
        == DEFAULT
    monkeypatch.setenv("SQUALL_ALLOWED_MODULES", "examples,mycompany.topologies")
    assert api_args([]).allowed_modules == worker_args(["--kind", "acker"]).allowed_modules \
        == ("examples", "mycompany.topologies")
    monkeypatch.setenv("SQUALL_ALLOWED_MODULES", "examples,../evil")
    with pytest.raises(ConfigError, match="SQUALL_ALLOWED_MODULES"):
        worker_args(["--kind", "acker"])
