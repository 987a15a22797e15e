"""Apache Kafka's node for the development stack (squall/dev/broker.py): its files as Kafka
reads them, one node or three, plain or secured."""

from __future__ import annotations

import re
from pathlib import Path

from squall.dev import broker


def nodes(n: int) -> list[broker.Node]:
    return [broker.Node.plain(i, "127.0.0.1", 9090 + i, 9190 + i) for i in range(1, n + 1)]


def test_the_version_is_read_from_the_pom() -> None:
    assert re.fullmatch(r"4\.\d+\.\d+", broker.version())
    libs = broker.libs_dir(Path("/c"))
    assert libs.name == "libs" and libs.parent.parent == Path("/c")
    assert re.fullmatch(rf"kafka-{re.escape(broker.version())}-[0-9a-f]{{8}}", libs.parent.name)


def test_the_compose_file_runs_the_version_the_stack_runs() -> None:
    """docker-compose.yml's broker (and its topics job) is the Kafka every test runs."""
    import yaml

    compose = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())
    images = {s["image"] for name, s in compose["services"].items() if name in ("kafka", "topics")}
    assert images == {f"apache/kafka:{broker.version()}"}


def test_one_node_replicates_nothing_and_three_replicate_with_two_in_sync() -> None:
    one = broker.server_properties(nodes(1)[0], nodes(1), Path("/d"))
    assert one["default.replication.factor"] == "1" and one["min.insync.replicas"] == "1"
    three = nodes(3)
    p = broker.server_properties(three[1], three, Path("/d"))
    for k in ("default.replication.factor", "offsets.topic.replication.factor",
              "transaction.state.log.replication.factor"):
        assert p[k] == "3", k
    assert p["min.insync.replicas"] == "2" and p["transaction.state.log.min.isr"] == "2"
    assert p["node.id"] == "2"
    assert p["controller.quorum.voters"] == "1@127.0.0.1:9191,2@127.0.0.1:9192,3@127.0.0.1:9193"
    assert p["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9192"
    assert p["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert p["auto.create.topics.enable"] == "false"


def test_a_secured_node_authenticates_every_listener_and_authorizes_by_acls(
        tmp_path: Path) -> None:
    sec = broker.Security(tmp_path / "ks.pem", tmp_path / "ca.pem", "s3cret",
                          (("reader", "pw"),))
    names = [*broker.SECURED_LISTENERS, broker.INTERNAL]
    node = broker.Node(1, "127.0.0.1", tuple((n, 9000 + i) for i, n in enumerate(names)), 9100)
    p = broker.server_properties(node, [node], tmp_path, sec)
    protocols = dict(x.split(":") for x in p["listener.security.protocol.map"].split(","))
    assert "PLAINTEXT" not in protocols.values()  # nothing unauthenticated
    assert p["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == broker.SCRAM
    assert p["listener.name.ssl.ssl.client.auth"] == "required"
    assert p["authorizer.class.name"].endswith("StandardAuthorizer")
    assert p["allow.everyone.if.no.acl.found"] == "false"
    assert p["super.users"] == "User:admin"
    assert 'user_reader="pw"' in p["listener.name.sasl_ssl.plain.sasl.jaas.config"]
    assert "CONTROLLER" not in p["advertised.listeners"]
    config = broker.write_node(tmp_path / "n", node, [node], sec)
    assert config.stat().st_mode & 0o077 == 0  # it holds passwords
    assert "s3cret" in config.read_text()


def test_a_cluster_id_that_starts_with_a_dash_is_one_argument() -> None:
    """A random id starts with "-" one time in 64: given apart from its option, the storage
    tool's parser takes it for an option and refuses to format."""
    argv = broker.format_argv("java", Path("/libs"), Path("/n/server.properties"), "-x1Y2z")
    assert "--cluster-id=-x1Y2z" in argv and "-x1Y2z" not in argv
