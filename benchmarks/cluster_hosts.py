"""Squall deployed on three hosts of this machine (squall/dev/hosts.py), as on a real
cluster, with no host special: on every host a ZooKeeper server (an ensemble of three), an
Apache Kafka broker (a KRaft quorum of three; Squall's topics and the source at replication
factor 3, ``min.insync.replicas`` 2), a Spark standalone worker, and a spout, an acker and
a bolts worker. The API runs on h1 and h2, the Spark master on h1 with a standby on h2
(Spark's ``spark.deploy.recoveryMode=ZOOKEEPER``), and PostgreSQL, the Trident state, on h3
(a single server: h3's death or cut takes it away until it is back). What the hosts share
besides Kafka, ZooKeeper and the database: the bolts' Spark checkpoints (the shared folder,
as NFS). Everything else stays on a host's own disk. The workers fence themselves when cut
off from the ensemble (``--fence-after-s``, a sixth of their session timeout) and leave the
cluster when cut off from Kafka alone (``--kafka-fence-after-s``)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.client import ApiClient
from squall.core.control.lease import Lease
from squall.core.control.spark_security import SECRET_ENV as SPARK_SECRET
from squall.core.control.spark_security import SPARK_SECRET_ENV as SPARK_DAEMON_SECRET
from squall.core.control.spark_security import daemon_options
from squall.core.errors import ConfigError, StackError
from squall.dev import broker, postgres
from squall.dev.ensemble import Ensemble
from squall.dev.hosts import DISK, SHARED, Host, Hosts
from squall.dev.probes import find_java, kafka_round_trip, wait_until
from squall.kafka_clients import KafkaClients
from squall.lease import LEASE_FILE_ENV

KAFKA_PORT, API_PORT, SPARK_PORT, PG_PORT = 9092, 8080, 7077, 5432
KAFKA_CONTROLLER_PORT = 9093
#: Each kind of worker's own /metrics port on a host.
WORKER_PORTS = {"spout": 9101, "acker": 9102, "bolts": 9103}
#: The hosts that run Squall's workers: all of them.
WORKER_HOSTS = ("h1", "h2", "h3")
#: The hosts of the Spark master (the first leads at the start) and of the API replicas.
MASTER_HOSTS = API_HOSTS = ("h1", "h2")
#: The host of the state database (PostgreSQL).
STATE_HOST = "h3"
#: How long a worker that reaches ZooKeeper but gets no write acknowledged by Kafka keeps
#: its tasks (services/worker/kafka_watch.py), as the Kubernetes manifests give it: a
#: broker's death (h1's, and the active controller's with it) holds writes for longer than
#: the least the worker takes.
KAFKA_FENCE_AFTER_S = 20
#: Each Spark worker's cores (with 1 GB each): with a host lost, the other two still hold
#: every bolts job's ``spark.cores.max`` (the word count's jobs take 2 each), or a job
#: moved off the lost host waits for executors until it returns.
SPARK_CORES = 2
#: A broker's heap: three brokers and everything else share this machine's memory.
KAFKA_HEAP_MB = 512
#: Every Squall process imports this checkout's code.
CODE = {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}


#: A worker's command line, log and environment.
Start = tuple[list[str], Path, dict[str, str]]


@dataclass
class HostCluster:
    hosts: Hosts
    bootstrap: str
    zookeeper: str
    state_url: str
    api: list[str]
    token: str
    state: postgres.Server
    #: the processes started on each host, by name
    procs: dict[str, dict[str, subprocess.Popen[bytes]]] = field(default_factory=dict)
    #: how each worker was started (its host, name): to start it again
    starts: dict[tuple[str, str], Start] = field(default_factory=dict)

    def restart(self, host: str, name: str, timeout_s: float = 120.0) -> None:
        """Stop a worker as an operator does (SIGTERM: its spouts drain, it leaves
        ZooKeeper), wait for it to exit, and start it again as it was."""
        p = self.procs[host][name]
        p.terminate()
        p.wait(timeout_s)
        argv, log, env = self.starts[(host, name)]
        h = self.hosts.host(host)
        self.procs[host][name] = self.hosts.start(h, argv, log, env=env, cwd=h.disk)

    def client(self) -> ApiClient:
        """A client of whichever API replica answers first."""
        for url in self.api:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return ApiClient(url, self.token)
            except OSError:
                continue
        raise StackError(f"no API replica answers ({', '.join(self.api)})")


def say(msg: str) -> None:
    print(f"[cluster] {msg}", file=sys.stderr, flush=True)


@contextmanager
def host_cluster(home: Path, session_timeout_s: float = 6.0) -> Iterator[HostCluster]:
    if home.exists():
        shutil.rmtree(home)
    # Every process started inherits it: the Spark cluster authenticates and encrypts
    # (squall/core/control/spark_security.py), as off the laptop it must.
    os.environ.setdefault(SPARK_SECRET, secrets.token_urlsafe(32))
    with Hosts(home / "hosts", 3, tag="sqc") as hosts:
        h1 = hosts.hosts[0]
        say(f"hosts {', '.join(f'{h.name} {h.address}' for h in hosts.hosts)}")
        state = hosts.host(STATE_HOST)
        pg = postgres.Server(home / "postgres", PG_PORT, state.address,
                             trust=hosts.subnet + ".0/24",
                             wrap=lambda argv: hosts.command(state, argv)).start()
        try:
            cl = _start(hosts, h1, pg, session_timeout_s)
            yield cl
        finally:
            pg.stop(kill=True)
            if not pg.data.is_relative_to(home):
                pg.remove()


def _start(hosts: Hosts, h1: Host, pg: postgres.Server,
           session_timeout_s: float) -> HostCluster:
    zk = Ensemble(hosts, list(hosts.hosts)).start()
    say(f"ZooKeeper ensemble {zk}")
    procs: dict[str, dict[str, subprocess.Popen[bytes]]] = {h.name: {} for h in hosts.hosts}
    bootstrap = _kafka(hosts, procs)
    say(f"Kafka {bootstrap}")
    state_url = pg.url
    master = _spark(hosts, procs, zk)
    token = secrets.token_urlsafe(32)
    api = []
    for h in map(hosts.host, API_HOSTS):
        procs[h.name]["api"] = hosts.start(h, [
            sys.executable, "-m", "services.api", "--zookeeper", zk, "--bootstrap-servers",
            bootstrap, "--host", h.address, "--port", str(API_PORT),
            "--advertise-url", f"http://{h.address}:{API_PORT}",
            "--session-timeout-s", str(max(session_timeout_s, 4.0))],
            h.disk / "logs" / "api.log", env={**CODE, "SQUALL_API_TOKEN": token}, cwd=h.disk)
        api.append(f"http://{h.address}:{API_PORT}")
    starts: dict[tuple[str, str], Start] = {}
    for name in WORKER_HOSTS:
        h = hosts.host(name)
        for kind, port in WORKER_PORTS.items():
            start: Start = ([
                sys.executable, "-m", "services.worker", "--kind", kind,
                "--worker-id", f"{kind}-{name}", "--zookeeper", zk,
                "--bootstrap-servers", bootstrap, "--workdir", str(DISK / f"worker-{kind}"),
                "--metrics-host", h.address, "--metrics-port", str(port),
                "--master", master, "--checkpoint-dir", str(SHARED / "checkpoints"),
                "--session-timeout-s", str(session_timeout_s),
                "--fence-after-s", str(session_timeout_s / 6),
                "--kafka-fence-after-s", str(KAFKA_FENCE_AFTER_S)],
                h.disk / "logs" / f"worker-{kind}.log",
                {**CODE, "SQUALL_STATE_URL": state_url, "PYSPARK_PYTHON": sys.executable,
                 "SPARK_LOCAL_IP": h.address})
            starts[(name, f"worker-{kind}")] = start
            procs[name][f"worker-{kind}"] = hosts.start(h, start[0], start[1], env=start[2],
                                                        cwd=h.disk)
    cl = HostCluster(hosts, bootstrap, zk, state_url, api, token, pg, procs, starts)
    deadline = time.monotonic() + 180
    while True:
        try:
            workers = cl.client().workers()
            if len(workers) >= len(WORKER_HOSTS) * len(WORKER_PORTS):
                break
        except Exception as e:  # not up yet
            if time.monotonic() > deadline:
                raise StackError(f"the workers did not register in 180 s: {e}") from e
        if time.monotonic() > deadline:
            raise StackError("the workers did not register in 180 s")
        time.sleep(0.5)
    say(f"API {', '.join(api)}; {len(workers)} workers registered")
    assert pg.alive() and os.path.isdir(hosts.shared)
    return cl


def _kafka(hosts: Hosts, procs: dict[str, dict[str, subprocess.Popen[bytes]]]) -> str:
    """A broker and KRaft controller on every host, formatted for one new cluster; the
    bootstrap list (every broker)."""
    nodes = [broker.Node.plain(i, h.address, KAFKA_PORT, KAFKA_CONTROLLER_PORT)
             for i, h in enumerate(hosts.hosts, 1)]
    java, libs, cluster = find_java(), broker.fetch(), broker.cluster_id()
    configs = {h.name: broker.write_node(h.disk / "kafka", n, nodes, seen_as=DISK / "kafka")
               for h, n in zip(hosts.hosts, nodes, strict=True)}
    for h in hosts.hosts:
        formatted = hosts.run(h, broker.format_argv(java, libs, configs[h.name], cluster), 120)
        if formatted.returncode != 0:
            raise StackError(f"formatting Kafka's storage on {h.name} failed: "
                             f"{formatted.stdout[-2000:]}")
    for h in hosts.hosts:
        procs[h.name]["kafka"] = hosts.start(
            h, broker.server_argv(java, libs, configs[h.name], KAFKA_HEAP_MB),
            h.disk / "logs" / "kafka.log")
    bootstrap = ",".join(n.listener for n in nodes)
    # Every broker registered before any client: a topic made meanwhile would be refused
    # (fewer brokers than default.replication.factor).
    wait_until(lambda: len(KafkaClients(bootstrap).metadata(5).brokers) == len(nodes)
               and kafka_round_trip(KafkaClients(bootstrap)), 120,
               f"Kafka on {bootstrap}",
               lambda: all(procs[h.name]["kafka"].poll() is None for h in hosts.hosts),
               hosts.hosts[0].disk / "logs" / "kafka.log")
    return bootstrap


def _spark(hosts: Hosts, procs: dict[str, dict[str, subprocess.Popen[bytes]]], zk: str
           ) -> str:
    """The Spark master and its standby, recovering through ZooKeeper, and a worker on
    every host; the master URL (both masters: the drivers and workers follow the leader).
    ``spark.worker.timeout`` is 10 s, not 60: a standby that takes over waits that long for
    the workers and applications of a killed host before it schedules again."""
    import pyspark

    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    py = {**CODE, "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
          "SPARK_HOME": str(Path(pyspark.__file__).parent)}
    py[SPARK_DAEMON_SECRET] = os.environ[SPARK_SECRET]
    # A worker beats every quarter of its own spark.worker.timeout: the same on both sides.
    timeout = f"-Dspark.worker.timeout=10 {daemon_options()}"
    recovery = " ".join([timeout, *(f"-D{k}={v}" for k, v in {
        "spark.deploy.recoveryMode": "ZOOKEEPER", "spark.deploy.zookeeper.url": zk,
        "spark.deploy.zookeeper.dir": "/spark"}.items())])
    masters = [hosts.host(n) for n in MASTER_HOSTS]
    for h in masters:
        # Started again whenever it exits, as a service manager would (systemd's
        # Restart=always): a master exits whenever its ZooKeeper connection is suspended,
        # which every ZooKeeper election does to every client, and with the other master's
        # host lost the cluster would be left without one.
        procs[h.name]["spark-master"] = hosts.start(h, [
            "/bin/sh", "-c", 'while :; do "$0" "$@"; sleep 1; done',
            spark_class, "org.apache.spark.deploy.master.Master", "--host", h.address,
            "--port", str(SPARK_PORT), "--webui-port", "8081"],
            h.disk / "logs" / "master.log",
            env={**py, "SPARK_LOCAL_IP": h.address, "SPARK_MASTER_OPTS": recovery}, cwd=h.disk)
        # the first master started leads; the standby starts once it does
        wait_until(lambda: _spark_leader(hosts) is not None, 120,
                   f"a Spark master leading on {masters[0].name}")
    master = "spark://" + ",".join(f"{h.address}:{SPARK_PORT}" for h in masters)
    for h in hosts.hosts:
        procs[h.name]["spark-worker"] = hosts.start(h, [
            spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", h.address,
            "--cores", str(SPARK_CORES), "--memory", f"{SPARK_CORES}g", "--webui-port", "8082",
            "--work-dir", str(DISK / "spark")], h.disk / "logs" / "spark-worker.log",
            env={**py, "SPARK_LOCAL_IP": h.address, "SPARK_WORKER_OPTS": timeout}, cwd=h.disk)
    wait_until(lambda: _spark_workers(hosts) >= len(hosts.hosts), 120,
               f"{len(hosts.hosts)} Spark workers at {master}")
    say(f"Spark {master} (leading: {_spark_leader(hosts)})")
    return master


def _spark_status(h: Host) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{h.address}:8081/json/", timeout=2) as r:
        doc: dict[str, Any] = json.load(r)
    return doc


def _spark_leader(hosts: Hosts) -> str | None:
    """The host whose Spark master leads (``ALIVE``), if one does."""
    for n in MASTER_HOSTS:
        try:
            if _spark_status(hosts.host(n)).get("status") == "ALIVE":
                return n
        except OSError:
            continue
    return None


def _spark_workers(hosts: Hosts) -> int:
    """The live workers the leading master knows."""
    leader = _spark_leader(hosts)
    if leader is None:
        return 0
    doc = _spark_status(hosts.host(leader))
    return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")


#: A task process's module, as its command line names it.
_MODULES = ("services.spout", "services.acker", "services.bolts")


def units_running(hosts: Hosts) -> dict[str, set[tuple[str, str]]]:
    """Per host, the units its processes run now, from their command lines: a spout's
    ``(component, task)``, an acker's ``("__acker", task)``, a bolts job's ``(bolt, "*")``;
    a process its worker's fence paused (stopped) runs nothing. What ZooKeeper's assignment
    says is not looked at: this is what really runs. The hosts are read one after another,
    so a process counts only if it still runs once all were read: two processes counted
    for one unit then ran at the same instant, not merely one after the other."""
    seen: list[tuple[str, set[tuple[str, str]], int]] = []
    for h in hosts.hosts:
        for pid in hosts.pids(h):
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            if not _runs(pid) or "-m" not in args or \
                    args[args.index("-m") + 1] not in _MODULES:
                continue
            module = args[args.index("-m") + 1]
            if module == "services.spout":
                units = {(_flag(args, "--component")[0], t) for t in _flag(args, "--tasks")}
            elif module == "services.acker":
                units = {("__acker", t) for t in _flag(args, "--tasks")}
            else:
                units = {(c, "*") for c in _flag(args, "--components")}
            seen.append((h.name, units, pid))
    out: dict[str, set[tuple[str, str]]] = {h.name: set() for h in hosts.hosts}
    for host, units, pid in seen:
        if _runs(pid):
            out[host] |= units
    return out


def _runs(pid: int) -> bool:
    """Whether ``pid`` runs: alive, not a zombie, not paused or frozen by its fence."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("T", "Z") and not _lease_ran_out(pid)


def _lease_ran_out(pid: int) -> bool:
    """Whether the process's worker lease (squall/lease.py) has run out: it then commits,
    emits and runs nothing. Read through the process's own root (its host's disk)."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    path = next((e.split(b"=", 1)[1] for e in env if e.startswith(LEASE_FILE_ENV.encode() + b"=")),
                None)
    if not path:
        return False
    try:
        lease = Lease.decode(Path(f"/proc/{pid}/root{path.decode()}").read_bytes())
    except (OSError, ConfigError):
        return True
    return not lease.holds(time.monotonic_ns())


def tree(hosts: Hosts, host: Host, root: int) -> list[int]:
    """``root`` and every process of ``host`` descended from it, parents first."""
    parents: dict[int, int] = {}
    for pid in hosts.pids(host):
        try:
            parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1]
                               .split()[1])
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo += sorted(c for c, pp in parents.items() if pp == pid)
    return out


def doubles(running: dict[str, set[tuple[str, str]]]) -> set[tuple[str, str]]:
    """The units that run on two hosts at once."""
    seen: dict[tuple[str, str], int] = {}
    for units in running.values():
        for u in units:
            seen[u] = seen.get(u, 0) + 1
    return {u for u, n in seen.items() if n > 1}


def _flag(args: list[str], name: str) -> list[str]:
    return args[args.index(name) + 1].split(",") if name in args else []
