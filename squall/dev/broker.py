"""Apache Kafka's broker for the development stack: its jars, fetched once per machine from
Maven Central, and a KRaft node's files and command.

The jars are ``org.apache.kafka:kafka_2.13`` with its runtime dependencies and Log4j 2, as
``broker-pom.xml`` beside this file names them, copied by Maven into the machine's cache
(``~/.cache/squall/kafka-<version>/libs``); nothing is built. A node is a combined broker
and controller (``process.roles=broker,controller``): one for a development stack, three
for a replicated one, every one a voter of the controller quorum. Its storage is formatted
(``kafka.tools.StorageTool format``) before its first start and kept across restarts.

With three nodes the stack is replicated as Squall is meant to run: every topic at
replication factor 3 with ``min.insync.replicas`` 2, the internal topics of Kafka's own
coordinators too. One node has no replicas to wait for.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tempfile
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from squall.core.errors import StackError
from squall.machine_cache import cache_home

POM = Path(__file__).with_name("broker-pom.xml")
_MAVEN = "{http://maven.apache.org/POM/4.0.0}"

LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.change.name = state.change.logger
logger.change.level = warn
"""


def version(pom: Path = POM) -> str:
    """The Kafka version the POM names: the one place it is written."""
    node = ET.parse(pom).getroot().find(f"{_MAVEN}properties/{_MAVEN}kafka.version")
    if node is None or not (node.text or "").strip():
        raise StackError(f"{pom} names no kafka.version")
    return (node.text or "").strip()


def libs_dir(cache: Path | None = None) -> Path:
    """Where this POM's jars are kept on this machine (named for its content: a changed
    dependency list is fetched anew)."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:8]
    return (cache or cache_home()) / f"kafka-{version()}-{digest}" / "libs"


def find_libs(cache: Path | None = None) -> Path:
    """The jars' folder; an error saying how to fetch them when they are not there."""
    libs = libs_dir(cache)
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise StackError(f"Apache Kafka {version()} is not in {libs}: fetch it with "
                         "'python -m squall.dev.broker' (Maven; scripts/setup.sh does it)")
    return libs


def fetch(cache: Path | None = None, mvn: str | None = None, say: bool = True) -> Path:
    """Copy the broker's jars from Maven Central into the cache (already there: nothing to
    do); the folder. Written beside it first, so that a failed copy leaves nothing half."""
    libs = libs_dir(cache)
    if any(libs.glob("kafka_2.13-*.jar")):
        return libs
    maven = mvn or shutil.which("mvn")
    if maven is None:
        raise StackError("Maven (mvn) is needed once to fetch Apache Kafka's broker: "
                         "apt-get install maven, or put mvn on PATH")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    if say:
        print(f"fetching Apache Kafka {version()} from Maven Central into {libs.parent}",
              file=sys.stderr, flush=True)
    run = subprocess.run(
        [maven, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
         f"-DoutputDirectory={staging}", "-DincludeScope=runtime"],
        capture_output=True, text=True)
    if run.returncode != 0 or not any(staging.glob("kafka_2.13-*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        out = (run.stdout + run.stderr).strip().splitlines()
        raise StackError(f"Maven could not fetch Apache Kafka {version()} (exit "
                         f"{run.returncode}):\n" + "\n".join(out[-15:]))
    try:
        staging.rename(libs)
    except OSError:  # another process fetched it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return libs


#: The listener the nodes speak to each other on (brokers replicate, controllers vote).
INTERNAL = "INTERNAL"
CONTROLLER = "CONTROLLER"
#: A secured node's client listeners, by their names (= their security protocols).
SECURED_LISTENERS = ("SSL", "SASL_SSL", "SASL_PLAINTEXT")
SCRAM = "SCRAM-SHA-512"


@dataclass(frozen=True)
class Security:
    """What a secured node authenticates and authorizes with. Every connection is
    authenticated: TLS with a client certificate (``SSL``: the principal is
    ``User:<its common name>``), SASL over TLS (``SASL_SSL``: SCRAM-SHA-512 or PLAIN) or
    SCRAM-SHA-512 over plaintext (``SASL_PLAINTEXT``; PLAIN would send the password in the
    clear); the nodes among themselves as the super user ``admin`` over SASL PLAIN. Every
    request is authorized by ACLs (the StandardAuthorizer): a principal with none may do
    nothing. SCRAM users are created through the admin (AlterUserScramCredentials)."""

    #: PEM: the node's private key (PKCS #8) and its certificate chain
    keystore: Path
    #: PEM: the CA whose certificates clients and nodes trust
    truststore: Path
    admin_password: str
    #: PLAIN's users (name -> password), besides ``admin``
    plain_users: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Node:
    """One broker-and-controller of a cluster: its id (1..), its address, its client
    listeners' ports by name (``PLAINTEXT``, or the secured ones and ``INTERNAL``) and its
    controller port."""

    node_id: int
    address: str
    ports: tuple[tuple[str, int], ...]
    controller_port: int

    @classmethod
    def plain(cls, node_id: int, address: str, port: int, controller_port: int) -> Node:
        return cls(node_id, address, (("PLAINTEXT", port),), controller_port)

    def port(self, listener: str) -> int:
        return dict(self.ports)[listener]

    def address_of(self, listener: str) -> str:
        return f"{self.address}:{self.port(listener)}"

    @property
    def listener(self) -> str:
        """The first client listener's address (a plain node's only one)."""
        return self.address_of(self.ports[0][0])

    @property
    def voter(self) -> str:
        return f"{self.node_id}@{self.address}:{self.controller_port}"


def _jaas(module: str, **options: str) -> str:
    opts = "".join(f' {k}="{v}"' for k, v in options.items())
    return f"{module} required{opts};"


_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def security_properties(sec: Security) -> dict[str, str]:
    """A secured node's listeners' authentication and its authorizer."""
    admin = {"username": "admin", "password": sec.admin_password,
             "user_admin": sec.admin_password}
    users = {f"user_{n}": pw for n, pw in sec.plain_users} | {"user_admin": sec.admin_password}
    props = {
        "listener.security.protocol.map": ",".join(
            [f"{n}:{n}" for n in SECURED_LISTENERS]
            + [f"{INTERNAL}:SASL_PLAINTEXT", f"{CONTROLLER}:SASL_PLAINTEXT"]),
        "inter.broker.listener.name": INTERNAL,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.enabled.mechanisms": f"{SCRAM},PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": SCRAM,
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.internal.plain.sasl.jaas.config": _jaas(_PLAIN, **admin),
        "listener.name.controller.plain.sasl.jaas.config": _jaas(_PLAIN, **admin),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas(_PLAIN, **users),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _jaas(_SCRAM),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": _jaas(_SCRAM),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(sec.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(sec.truststore),
        "listener.name.ssl.ssl.client.auth": "required",
        # A certificate's principal is its common name, as a SASL user's is its name.
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+).*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }
    return props


def cluster_id() -> str:
    """A new KRaft cluster id (a Kafka ``Uuid``: 16 random bytes, URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def replication(nodes: int) -> tuple[int, int]:
    """The replication factor and ``min.insync.replicas`` of a cluster of ``nodes``."""
    rf = min(3, nodes)
    return rf, (2 if rf >= 3 else 1)


def server_properties(node: Node, cluster: Sequence[Node], data: Path,
                      security: Security | None = None) -> dict[str, str]:
    """A node's ``server.properties``, as a mapping (its keys are Kafka's)."""
    rf, isr = replication(len(cluster))
    clients = [f"{name}://{node.address_of(name)}" for name, _ in node.ports]
    props = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(n.voter for n in cluster),
        "listeners": ",".join([*clients, f"{CONTROLLER}://{node.address}:"
                                          f"{node.controller_port}"]),
        "advertised.listeners": ",".join(clients),
        "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{CONTROLLER}:PLAINTEXT",
        "controller.listener.names": CONTROLLER,
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "1",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(isr),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(isr),
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(isr),
        # Kafka's 50 partitions of each coordinator's log, created at the first group or
        # transaction, are most of a small stack's start on two cores.
        "offsets.topic.num.partitions": "8",
        "transaction.state.log.num.partitions": "8",
        # A group's first member is not held 3 s for others that may join.
        "group.initial.rebalance.delay.ms": "0",
        # Squall creates every topic it uses with its partitions; a topic made by a
        # client's first metadata request would have one.
        "auto.create.topics.enable": "false",
    }
    if security is not None:
        props |= security_properties(security)
    return props


def write_node(home: Path, node: Node, cluster: Sequence[Node],
               security: Security | None = None, seen_as: Path | None = None) -> Path:
    """``home``'s ``server.properties`` (readable by its owner only: a secured node's holds
    passwords), ``log4j2.properties`` and ``data/``; the config's path as the node sees it
    (``seen_as``: where ``home`` is mounted for it)."""
    at = seen_as or home
    (home / "data").mkdir(parents=True, exist_ok=True)
    (home / "log4j2.properties").write_text(LOG4J)
    props = server_properties(node, cluster, at / "data", security)
    config = home / "server.properties"
    config.touch(mode=0o600)
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return at / "server.properties"


def jvm(java: str, libs: Path, config: Path, heap_mb: int) -> list[str]:
    """A Kafka JVM's leading arguments (Kafka's own start script's GC settings)."""
    return [java, f"-Xmx{heap_mb}m", f"-Xms{min(heap_mb, 256)}m", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={config.with_name('log4j2.properties')}",
            "-cp", f"{libs}/*"]


def format_argv(java: str, libs: Path, config: Path, cluster: str) -> list[str]:
    return [*jvm(java, libs, config, 256), "kafka.tools.StorageTool", "format",
            "--config", str(config), f"--cluster-id={cluster}", "--ignore-formatted"]


def server_argv(java: str, libs: Path, config: Path, heap_mb: int = 1024) -> list[str]:
    return [*jvm(java, libs, config, heap_mb), "kafka.Kafka", str(config)]


def format_storage(java: str, libs: Path, configs: Sequence[Path], cluster: str,
                   timeout_s: float = 120.0) -> None:
    """Format every node's storage for ``cluster``, the nodes at once (a JVM each)."""
    procs = [(c, subprocess.Popen(format_argv(java, libs, c, cluster), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  text=True))
             for c in configs]
    for config, p in procs:
        try:
            out, _ = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        if p.returncode != 0:
            tail = "\n".join(out.strip().splitlines()[-10:])
            raise StackError(f"formatting Kafka's storage for {config} failed "
                             f"(exit {p.returncode}):\n{tail}")


def main() -> int:
    try:
        print(fetch())
    except StackError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
