"""A ZooKeeper server's files and command, from PySpark's own jars: the development
stack's single server (squall/dev/stack.py) and the cluster benchmark's ensemble
(squall/dev/ensemble.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %-5p [%t] %c{1}: %m%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
"""


@dataclass(frozen=True)
class ServerTls:
    """A secure client port: the server's key and certificate chain in one PEM file (the
    key PKCS #8), and the CA its clients' certificates must be signed by."""

    port: int
    keystore: Path
    ca: Path


def write_config(home: Path, client_port: int, address: str, seen_as: Path | None = None,
                 peers: Sequence[str] = (), my_id: int = 0, tls: ServerTls | None = None
                 ) -> Path:
    """``home``'s ``zoo.cfg``, ``log4j2.properties`` and ``data/``, for a server listening
    on ``address:client_port`` (and with ``tls``, TLS with client certificates on its port:
    Netty's connection factory, PEM stores); the config's path as the server sees it
    (``seen_as``: where ``home`` is mounted for it). ``peers``: the ensemble's addresses,
    server 1 first (none: a server on its own); ``my_id``: this server's number in it."""
    at = seen_as or home
    (home / "data").mkdir(parents=True, exist_ok=True)
    (home / "log4j2.properties").write_text(LOG4J)
    lines = [f"dataDir={at / 'data'}", f"clientPort={client_port}",
             f"clientPortAddress={address}", "admin.enableServer=false", "maxClientCnxns=0",
             "4lw.commands.whitelist=ruok,srvr,stat"]
    if peers:
        # A follower notices its leader gone after syncLimit ticks and every client of the
        # ensemble waits for the election: 2 s, not ZooKeeper's default 10 s, so that a lost
        # host's ZooKeeper leader does not cut every worker off past its fence's grace.
        lines += ["tickTime=500", "initLimit=20", "syncLimit=4"]
        # The server caps every session at this: the Spark master's latch (Spark asks for a
        # fixed 60 s) then expires 10 s after its master died, and the standby takes over.
        lines += ["maxSessionTimeout=10000"]
        lines += [f"server.{i}={p}:2888:3888" for i, p in enumerate(peers, 1)]
        (home / "data" / "myid").write_text(f"{my_id}\n")
    else:
        lines += ["tickTime=2000", "initLimit=10", "syncLimit=5", "maxSessionTimeout=60000"]
    if tls is not None:
        lines += [f"secureClientPort={tls.port}",
                  "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                  f"ssl.keyStore.location={tls.keystore}", "ssl.keyStore.type=PEM",
                  f"ssl.trustStore.location={tls.ca}", "ssl.trustStore.type=PEM",
                  "ssl.clientAuth=need"]
    (home / "zoo.cfg").write_text("\n".join(lines) + "\n")
    return at / "zoo.cfg"


def server_argv(java: str, jars: Path, config: Path) -> list[str]:
    """The command of a server whose files :func:`write_config` wrote (``config``: the
    config's path as the server sees it)."""
    return [java, "-Xmx256m", "-XX:+UseSerialGC",
            f"-Dlog4j2.configurationFile={config.with_name('log4j2.properties')}",
            "-cp", f"{jars}/*", "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(config)]
