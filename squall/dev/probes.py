"""What the development stack needs to start and know it runs: its binaries found (Java,
the embedded broker, ZooKeeper's jars) and readiness probes (a port free, a Kafka round
trip, a ZooKeeper session)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squall.core.errors import PortTaken, StackError
from squall.core.topology.topics import HEALTH_PARTITIONS, HEALTH_TOPIC
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients, quiet_logger
from squall.processes import HOST


def find_java(explicit: str | None = None) -> str:
    if explicit:
        candidates = [explicit]
    else:
        home = os.environ.get("JAVA_HOME")
        candidates = [str(Path(home) / "bin" / "java")] if home else []
        candidates.append("java")
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    raise StackError(
        f"Java not found (tried {', '.join(candidates)}): ZooKeeper needs a JDK "
        "17+. Install one (apt-get install openjdk-17-jre-headless) or set JAVA_HOME."
    )


def pyspark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise StackError("pyspark is not installed; ZooKeeper runs from its bundled jars")
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not any(jars.glob("zookeeper-*.jar")):
        raise StackError(f"no zookeeper jar in {jars}")
    return jars


def check_port_free(port: int, what: str) -> None:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            raise PortTaken(
                f"{what} port {port} on {HOST} is taken by another process; choose another "
                "(or 0 for a free one)"
            ) from None


def port_clash(log: Path) -> bool:
    """Whether a child's log says it could not bind its port (the words of the JVM and of
    PostgreSQL alike): another process took the port between its choice and the bind."""
    try:
        return "Address already in use" in log.read_text(errors="replace")
    except OSError:
        return False


def tail(path: Path | str, lines: int = 20) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:]) or "(empty log)"


def wait_until(check: Callable[[], bool], timeout_s: float, what: str,
               alive: Callable[[], bool] | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            error = PortTaken if log is not None and port_clash(log) else StackError
            raise error(f"{what} exited during start-up. Last lines of {log}:\n{tail(log or '')}")
        try:
            if check():
                return
        except Exception as e:  # not ready yet; keep the reason for the error
            last = e
        time.sleep(0.1)
    raise StackError(
        f"{what} did not answer within {timeout_s:.0f}s ({last}). Last lines of {log}:\n"
        f"{tail(log or '')}"
    )


# ----- readiness probes -----------------------------------------------------


def kafka_round_trip(clients: KafkaClients, timeout_s: float = 10.0) -> bool:
    """Create the health topic, produce a unique value and read it back."""
    from confluent_kafka import TopicPartition

    ensure_topics(clients, {HEALTH_TOPIC: HEALTH_PARTITIONS}, timeout_s, quiet=True)
    token = uuid.uuid4().bytes
    producer = clients.producer({"message.timeout.ms": int(timeout_s * 1000),
                                 "logger": quiet_logger("probe")})
    delivered: list[int] = []

    def on_delivery(err: object, msg: Any) -> None:
        if not err:
            delivered.append(int(msg.offset()))

    producer.produce(HEALTH_TOPIC, token, partition=0, on_delivery=on_delivery)
    producer.flush(timeout_s)
    if not delivered:
        return False
    consumer = clients.consumer({"group.id": f"squall-health-{os.getpid()}",
                                 "enable.auto.commit": False, "logger": quiet_logger("probe")})
    try:
        consumer.assign([TopicPartition(HEALTH_TOPIC, 0, delivered[0])])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error() and msg.value() == token:
                return True
        return False
    finally:
        consumer.close()


def zookeeper_session(hosts: str, timeout_s: float = 2.0) -> bool:
    """Open a real ZooKeeper session and read the root. One attempt of ``timeout_s``:
    kazoo waits that long for the answer to its connect request, and a ZooKeeper still
    booting may never give one (it takes the connection, fails to close it, and keeps
    the socket open: a 10 s stall in one demo start of eight); the caller retries."""
    from kazoo.client import KazooClient

    # Refused connections are expected while ZooKeeper boots: keep them out of the console.
    zk = KazooClient(hosts=hosts, timeout=timeout_s, logger=quiet_logger("zookeeper"))
    try:
        zk.start(timeout=timeout_s)
        zk.get_children("/")
        return True
    finally:
        zk.stop()
        zk.close()
