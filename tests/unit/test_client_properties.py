"""The user's Kafka client properties: where they come from, which wins, what Squall keeps,
and that their secrets are shown nowhere."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from squall.core.control.client_properties import (
    OWNED,
    REDACTED,
    ClientProperties,
    env_name,
    parse,
    parse_env,
    parse_file,
    scrub,
)
from squall.core.control.error_reports import ErrorReports
from squall.core.errors import ConfigError
from squall.kafka_clients import KafkaClients, Scrubbing, load_properties, property_environment

FILE = """\
# the cluster's client.properties
security.protocol=SSL
ssl.ca.location = /etc/kafka/ca.pem
! another comment
sasl.password: from-the-file
consumer.fetch.wait.max.ms=200
linger.ms=5
producer.linger.ms=\\
  20
"""


def props(text: str = FILE, env: dict[str, str] | None = None) -> ClientProperties:
    return parse(parse_file(text, "client.properties"), parse_env(env or {}))


def test_a_file_is_read_as_kafkas_client_properties() -> None:
    p = props()
    assert p.common == {"security.protocol": "SSL", "ssl.ca.location": "/etc/kafka/ca.pem",
                        "sasl.password": "from-the-file", "linger.ms": "5"}
    assert p.roles == {"consumer": {"fetch.wait.max.ms": "200"},
                       "producer": {"linger.ms": "20"}}
    assert p.origins["producer.linger.ms"] == "client.properties:8"


def test_the_more_specific_wins_and_the_environment_over_the_file() -> None:
    p = props(env={"SQUALL_KAFKA_SASL_PASSWORD": "from-env", "SQUALL_KAFKA_LINGER_MS": "1",
                   "SQUALL_KAFKA_CONSUMER_FETCH_WAIT_MAX_MS": "300"})
    producer = p.for_role("producer")
    assert producer["sasl.password"] == "from-env"  # same name: the environment's
    assert producer["linger.ms"] == "20"  # the role's, over the environment's common one
    assert p.for_role("consumer")["fetch.wait.max.ms"] == "300"
    assert p.for_role("admin")["linger.ms"] == "1"
    # the user's properties over Squall's own tuning
    assert p.apply("consumer", {"fetch.wait.max.ms": 10, "group.id": "g"}) == {
        **p.for_role("consumer"), "group.id": "g"}
    assert KafkaClients("b:9093", p).conf("admin")["bootstrap.servers"] == "b:9093"


@given(st.lists(st.sampled_from(["ssl", "ca", "location", "sasl", "oauthbearer", "x_y", "ms"]),
                min_size=1, max_size=5))
def test_an_environment_name_reads_back_as_its_property(parts: list[str]) -> None:
    name = ".".join(parts)
    assert parse_env({env_name(name): "v"}) == {name: ("v", env_name(name))}


def test_names_squall_owns_are_refused_with_what_to_use_instead() -> None:
    for name in OWNED:
        with pytest.raises(ConfigError, match=re.escape(f"properties:1: '{name}' is set by")):
            props(f"{name}=x\n")
    with pytest.raises(ConfigError, match=r"SQUALL_KAFKA_CONSUMER_AUTO_OFFSET_RESET: "
                                          r"'consumer\.auto\.offset\.reset'.*start"):
        props("", {"SQUALL_KAFKA_CONSUMER_AUTO_OFFSET_RESET": "latest"})


def test_a_malformed_line_is_named_by_its_line_not_quoted() -> None:
    with pytest.raises(ConfigError) as e:
        props("security.protocol=SSL\nhunter2-no-equals-sign\n")
    assert str(e.value) == "client.properties:2: expected name=value"
    with pytest.raises(ConfigError, match="not a Kafka client property name"):
        props("", {"SQUALL_KAFKA_SSL_": "x"})


def test_topic_settings_are_kept_apart_from_the_clients() -> None:
    p = props("replication.factor=3\ntopic.min.insync.replicas=2\ntopic.retention.ms=1000\n")
    assert p.replication_factor == 3 and p.for_role("producer") == {}
    assert p.topic_config() == {"min.insync.replicas": "2", "retention.ms": "1000"}
    assert props("replication.factor=1\n").topic_config() == {"min.insync.replicas": "1"}
    assert props("replication.factor=3\n").topic_config() == {"min.insync.replicas": "2"}
    # without a replication factor, the brokers' default and their min.insync.replicas
    assert props("").replication_factor is None and props("").topic_config() == {}
    assert props("replication.factor=-1\n").replication_factor is None
    assert props("topic.min.insync.replicas=2\n").topic_config() == {
        "min.insync.replicas": "2"}
    with pytest.raises(ConfigError, match=r"replication\.factor must be a whole number.*'0'"):
        props("replication.factor=0\n")
    with pytest.raises(ConfigError, match=re.escape("min.insync.replicas=3 is more "
                                                    "than replication.factor=2")):
        props("replication.factor=2\ntopic.min.insync.replicas=3\n")


SECRETS = {"sasl.password": "pw-1234", "ssl.key.password": "kp-5678",
           "ssl.key.pem": "-----BEGIN KEY-----abc", "sasl.oauthbearer.client.secret": "cs-9",
           "sasl.oauthbearer.config": "principal=x token=tk-42"}


def secret_props() -> ClientProperties:
    text = "".join(f"{k}={v}\n" for k, v in SECRETS.items())
    return props(text + "security.protocol=SASL_SSL\nsasl.username=squall\n")


def test_secrets_are_redacted_wherever_the_properties_are_shown() -> None:
    p = secret_props()
    shown = p.redacted()
    assert shown["sasl.username"] == "squall" and shown["security.protocol"] == "SASL_SSL"
    assert all(shown[k] == REDACTED for k in SECRETS)
    for text in (repr(p), str(p), json.dumps(shown), repr(KafkaClients("b", p))):
        assert not any(v in text for v in SECRETS.values()), text
    assert sorted(p.secrets()) == sorted(SECRETS.values())


def test_service_settings_show_no_secret(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    from services.acker.settings import parse_args as acker
    from services.api.settings import parse_args as api
    from services.spout.settings import parse_args as spout

    f = tmp_path / "client.properties"
    f.write_text("".join(f"{k}={v}\n" for k, v in SECRETS.items()))
    monkeypatch.setenv("SQUALL_KAFKA_PROPERTIES", str(f))
    monkeypatch.setenv("SQUALL_KAFKA_SASL_PASSWORD", "env-pw-77")
    settings: list[Any] = [acker(["--topology", "t", "--tasks", "0", "--num-ackers", "1"]),
                api(["--allow-anonymous"]),
                spout(["--topology", "t", "--component", "s", "--topics", "src",
                       "--tasks", "0", "--num-tasks", "1"])]
    for s in settings:
        assert s.kafka.for_role("consumer")["sasl.password"] == "env-pw-77"
        for text in (repr(s), str(s), s.model_dump_json()):
            assert "env-pw-77" not in text and "kp-5678" not in text, text


def test_errors_and_log_lines_are_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    p = secret_props()
    reports = ErrorReports(secrets=p.secrets())
    reports.report("spout", "SASL authentication failed for pw-1234 (kp-5678)", 1)
    assert "pw-1234" not in reports.to_json().decode() and REDACTED in reports.to_json().decode()
    log = logging.getLogger("test.scrub")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    handler.addFilter(Scrubbing(p.secrets()))
    log.addHandler(handler)
    try:
        log.warning("configured %s", {"sasl.password": "pw-1234"})
    finally:
        log.removeHandler(handler)
    assert seen == [f"configured {{'sasl.password': '{REDACTED}'}}"]
    assert scrub("ab", ["ab"]) == "ab"  # too short to be told from ordinary text


def test_the_file_and_variables_come_from_the_environment(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("security.protocol=SSL\n")
    env = {"SQUALL_KAFKA_PROPERTIES": str(f), "SQUALL_KAFKA_SSL_CA_LOCATION": "/ca.pem",
           "SQUALL_KAFKA_PORT": "9094", "SQUALL_ACKER_TOPOLOGY": "t"}
    p = load_properties(env)
    assert p.common == {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"}
    assert property_environment(env) == {"SQUALL_KAFKA_PROPERTIES": str(f),
                                         "SQUALL_KAFKA_SSL_CA_LOCATION": "/ca.pem"}
    with pytest.raises(ConfigError, match="SQUALL_KAFKA_PROPERTIES=/nope: cannot read"):
        load_properties({"SQUALL_KAFKA_PROPERTIES": "/nope"})


@pytest.mark.parametrize("bad", ["0", "-2", "3.5", "three", "", "-1x", "1e3"])
def test_a_malformed_replication_factor_is_refused_naming_it_and_where(bad: str) -> None:
    with pytest.raises(ConfigError) as got:
        props(f"replication.factor={bad}\n")
    assert "replication.factor" in str(got.value) and repr(bad) in str(got.value)
