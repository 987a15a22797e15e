"""The development stack: Apache Kafka (one KRaft node, or several replicated) and ZooKeeper
on loopback, and on request PostgreSQL (for Trident state; :mod:`squall.dev.postgres`).

No Docker here: Kafka's broker runs from its jars, fetched once from Maven Central
(:mod:`squall.dev.broker`), and ZooKeeper from the jars bundled in PySpark, both on the
installed JDK. Each process gets its own directory with its log; a start waits until each
really answers (a produce / consume round trip, a ZooKeeper session) and stops everything
it started if anything fails, showing the tail of the failing process's log.

Processes started for tests die with their parent (``PR_SET_PDEATHSIG``); the
detached ones of ``squall dev up`` are recorded in a state file for
``squall dev status`` and ``squall dev down``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from squall.core.errors import PortTaken, StackError
from squall.dev import broker, postgres, zookeeper
from squall.dev.probes import (
    check_port_free,
    find_java,
    kafka_round_trip,
    pyspark_jars,
    wait_until,
    zookeeper_session,
)
from squall.kafka_clients import KafkaClients
from squall.processes import HOST, die_with_parent, free_port, pid_alive, stop_pid

STATE_FILE = "stack.json"
PORT_ATTEMPTS = 3  # starts with freshly chosen ports, when one was taken meanwhile


def node_name(node_id: int, nodes: int) -> str:
    """A broker's process name: ``kafka`` alone, ``kafka-1``.. of several."""
    return "kafka" if nodes == 1 else f"kafka-{node_id}"


@dataclass(frozen=True)
class StackSettings:
    """Where the stack lives and how it starts. Port 0 picks a free port (``kafka_port``:
    the first broker's)."""

    home: Path = Path(".squall/dev")
    brokers: int = 1
    kafka_port: int = 0
    zk_port: int = 0
    java: str | None = None
    start_timeout_s: float = 60.0
    detached: bool = False
    postgres: bool = False
    postgres_port: int = 0


@dataclass
class ProcessInfo:
    name: str
    pid: int
    port: int
    log: str
    #: what asks it to stop (PostgreSQL: SIGINT, its fast shutdown; SIGTERM waits for clients;
    #: Kafka: SIGTERM, a controlled shutdown)
    stop_signal: int = int(signal.SIGTERM)
    #: a directory to delete once it stopped
    cleanup: str | None = None


@dataclass
class StackInfo:
    """What is running and where: also the content of the state file."""

    bootstrap_servers: str
    zookeeper: str
    processes: list[ProcessInfo] = field(default_factory=list)
    #: a libpq URL, when the stack runs PostgreSQL
    postgres: str | None = None

    def clients(self) -> KafkaClients:
        """Clients of this stack's brokers (plain Kafka on loopback: no properties)."""
        return KafkaClients(self.bootstrap_servers)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> StackInfo:
        raw = json.loads(text)
        return cls(raw["bootstrap_servers"], raw["zookeeper"],
                   [ProcessInfo(**p) for p in raw["processes"]], raw.get("postgres"))


class EmbeddedStack:
    """Start, probe and stop the broker(s) and ZooKeeper. Use as a context manager."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.home = settings.home.resolve()
        self.info: StackInfo | None = None
        self._argv: dict[str, tuple[int, Path, list[str], Path]] = {}

    def __enter__(self) -> StackInfo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> StackInfo:
        s = self.settings
        state = self.home / STATE_FILE
        if state.exists():
            running = load_state(self.home)
            if running and any(pid_alive(p.pid) for p in running.processes):
                raise StackError(f"a stack is already running from {self.home} "
                                 "(squall dev status / squall dev down)")
        if not 1 <= s.brokers <= 9:
            raise StackError(f"brokers={s.brokers}: Apache Kafka runs 1 to 9 nodes here")
        # A port chosen free can be bound by another process before the child binds it;
        # a port the user named is theirs to fix, so only chosen ones are chosen again.
        chosen = not (s.kafka_port or s.zk_port or s.postgres_port)
        attempt = 1
        while True:
            try:
                return self._start_once()
            except PortTaken:
                if not chosen or attempt == PORT_ATTEMPTS:
                    raise
                attempt += 1

    def _start_once(self) -> StackInfo:
        s = self.settings
        java, jars = find_java(s.java), pyspark_jars()
        kports = [s.kafka_port or free_port()] + [free_port() for _ in range(s.brokers - 1)]
        zport = s.zk_port or free_port()
        for port in kports:
            check_port_free(port, "Kafka")
        check_port_free(zport, "ZooKeeper")
        self.home.mkdir(parents=True, exist_ok=True)
        bootstrap = ",".join(f"{HOST}:{p}" for p in kports)
        zk_hosts = f"{HOST}:{zport}"
        self.info = StackInfo(bootstrap, zk_hosts)
        try:
            self._start_kafka(java, kports)
            zk_dir = self._fresh_dir("zookeeper")
            config = zookeeper.write_config(zk_dir, zport, HOST)
            self._spawn("zookeeper", zport, zk_dir / "zookeeper.log",
                        zookeeper.server_argv(java, jars, config), zk_dir)
            if s.postgres:
                self._start_postgres()
            self._save()
            brokers = [p for p in self.info.processes if p.name.startswith("kafka")]
            z = self._process("zookeeper")
            kafka = self.info.clients()
            wait_until(lambda: len(kafka.metadata(5).brokers) == s.brokers
                       and kafka_round_trip(kafka), s.start_timeout_s,
                       f"Apache Kafka on {bootstrap}",
                       lambda: all(pid_alive(b.pid) for b in brokers), Path(brokers[0].log))
            wait_until(lambda: zookeeper_session(zk_hosts), s.start_timeout_s,
                       f"ZooKeeper on {zk_hosts}", lambda: pid_alive(z.pid), Path(z.log))
            if s.postgres:
                pg, conninfo = self._process("postgres"), self.info.postgres or ""
                wait_until(lambda: postgres.answers(conninfo), s.start_timeout_s,
                           f"PostgreSQL on {conninfo}", lambda: pid_alive(pg.pid), Path(pg.log))
        except BaseException:
            self.stop()
            raise
        return self.info

    def _start_kafka(self, java: str, ports: list[int]) -> None:
        """Apache Kafka: a KRaft node per port, each broker and controller, formatted as
        one new cluster, then started."""
        libs = broker.fetch()
        nodes = [broker.Node.plain(i, HOST, port, free_port()) for i, port in enumerate(ports, 1)]
        dirs = [self._fresh_dir(node_name(n.node_id, len(nodes))) for n in nodes]
        configs = [broker.write_node(d, n, nodes) for d, n in zip(dirs, nodes, strict=True)]
        broker.format_storage(java, libs, configs, broker.cluster_id())
        heap = 1024 if len(nodes) == 1 else 512
        for n, d, c, port in zip(nodes, dirs, configs, ports, strict=True):
            self._spawn(node_name(n.node_id, len(nodes)), port, d / "kafka.log",
                        broker.server_argv(java, libs, c, heap), d)

    def _process(self, name: str) -> ProcessInfo:
        assert self.info is not None
        return next(p for p in self.info.processes if p.name == name)

    def stop(self) -> None:
        info = self.info or load_state(self.home)
        if info is not None:
            # All asked at once: brokers stopped one by one would leave the last without a
            # controller quorum, waiting out its controlled shutdown.
            for p in reversed(info.processes):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, p.stop_signal)
            for p in reversed(info.processes):
                stop_pid(p.pid, first=signal.Signals(p.stop_signal))
                if p.cleanup:
                    shutil.rmtree(p.cleanup, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.home / STATE_FILE).unlink()
        self.info = None

    def _start_postgres(self) -> None:
        assert self.info is not None
        port = self.settings.postgres_port or free_port()
        check_port_free(port, "PostgreSQL")
        pg_dir = self._fresh_dir("postgres")
        log, data = pg_dir / "postgres.log", postgres.data_dir(pg_dir)
        try:
            postgres.init_cluster(data, log)
            self._spawn("postgres", port, log, postgres.server_argv(data, port), pg_dir,
                        user=postgres.run_as(), stop_signal=signal.SIGINT)
        finally:
            if data.parent != pg_dir and self.info.processes[-1].name != "postgres":
                shutil.rmtree(data.parent, ignore_errors=True)  # initdb failed
        self.info.processes[-1].cleanup = str(data.parent) if data.parent != pg_dir else None
        self.info.postgres = postgres.url(port)

    def _fresh_dir(self, name: str) -> Path:
        d = self.home / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d

    def restart(self, name: str) -> None:
        """Stop one of the stack's processes and start it again as it was (Kafka and ZooKeeper
        keep their data directories: a restart, as an operator does one)."""
        assert self.info is not None
        old = next((p for p in self.info.processes if p.name == name), None)
        if old is None or name not in self._argv:
            raise StackError(f"no {name!r} process in this stack")
        stop_pid(old.pid)
        self.info.processes.remove(old)
        port, log, argv, cwd = self._argv[name]
        self._spawn(name, port, log, argv, cwd)
        self._save()

    def _spawn(self, name: str, port: int, log: Path, argv: list[str], cwd: Path,
               user: tuple[int, int] | None = None,
               stop_signal: signal.Signals = signal.SIGTERM) -> None:
        assert self.info is not None
        self._argv[name] = (port, log, argv, cwd)
        with open(log, "ab") as out:
            if user is not None:
                os.chown(log, *user)
            # With ``user``, Popen changes the uid before preexec_fn: the death signal set
            # there survives (a uid change clears one set before it).
            proc = subprocess.Popen(
                argv, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, user=user[0] if user else None,
                group=user[1] if user else None,
                preexec_fn=None if self.settings.detached else die_with_parent,
            )
        self.info.processes.append(ProcessInfo(name, proc.pid, port, str(log),
                                               int(stop_signal)))

    def _save(self) -> None:
        assert self.info is not None
        (self.home / STATE_FILE).write_text(self.info.to_json())


def load_state(home: Path) -> StackInfo | None:
    try:
        return StackInfo.from_json((home / STATE_FILE).read_text())
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        raise StackError(f"unreadable stack state {home / STATE_FILE}: {e}") from None


def status(home: Path) -> list[tuple[ProcessInfo, bool]]:
    info = load_state(home.resolve())
    return [] if info is None else [(p, pid_alive(p.pid)) for p in info.processes]


@contextlib.contextmanager
def running_stack(settings: StackSettings) -> Iterator[StackInfo]:
    stack = EmbeddedStack(settings)
    try:
        yield stack.start()
    finally:
        stack.stop()
