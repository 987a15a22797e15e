"""Squall deployed on three hosts of this machine (squall/dev/hosts.py), as on a real
cluster: a ZooKeeper ensemble of three, an Apache Kafka broker on h1, two API replicas (h1,
h2), a Spark standalone master (h1) and a worker per host, and a spout, acker and bolts
worker on each of h2 and h3. What the hosts share: Kafka, ZooKeeper, the PostgreSQL state
(a database service on the bridge, outside the hosts) and the bolts' Spark checkpoints
(the shared folder, as NFS). Everything else stays on a host's own disk. The workers fence
themselves (``--fence-after-s``, a sixth of their session timeout) when cut off from the
ensemble."""

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

from squall.client import ApiClient
from squall.core.errors import StackError
from squall.dev import broker, postgres
from squall.dev.ensemble import Ensemble
from squall.dev.hosts import DISK, SHARED, Host, Hosts
from squall.dev.probes import find_java, kafka_round_trip, wait_until
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent

KAFKA_PORT, API_PORT, SPARK_PORT, PG_PORT = 9092, 8080, 7077, 5432
KAFKA_CONTROLLER_PORT = 9093
#: Each kind of worker's own /metrics port on a host.
WORKER_PORTS = {"spout": 9101, "acker": 9102, "bolts": 9103}
#: The hosts that run Squall's workers (h1 keeps the broker: it is never failed).
WORKER_HOSTS = ("h2", "h3")
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
    with Hosts(home / "hosts", 3, tag="sqc") as hosts:
        h1 = hosts.hosts[0]
        say(f"hosts {', '.join(f'{h.name} {h.address}' for h in hosts.hosts)}")
        data = postgres.data_dir(home / "postgres")
        pg = _postgres(home / "postgres", data, hosts.subnet + ".1")
        try:
            cl = _start(hosts, h1, pg, session_timeout_s)
            yield cl
        finally:
            pg.kill()
            pg.wait(30)
            if not data.is_relative_to(home):
                shutil.rmtree(data.parent, ignore_errors=True)


def _postgres(home: Path, data: Path, address: str) -> subprocess.Popen[bytes]:
    """The state database: a service on the bridge, reached by every host."""
    home.mkdir(parents=True, exist_ok=True)
    postgres.init_cluster(data, home / "postgres.log")
    with open(data / "pg_hba.conf", "a") as hba:  # the hosts, on the bridge
        hba.write(f"host all all {address}/24 trust\n")
    argv = postgres.server_argv(data, PG_PORT, listen=address)
    who = postgres.run_as()
    with open(home / "postgres.log", "ab") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                             user=who[0] if who else None, group=who[1] if who else None,
                             start_new_session=True, preexec_fn=die_with_parent)
    conninfo = f"postgresql://{postgres.USER}@{address}:{PG_PORT}/{postgres.DATABASE}"
    wait_until(lambda: postgres.answers(conninfo), 60, f"PostgreSQL on {address}",
               lambda: p.poll() is None, home / "postgres.log")
    return p


def _start(hosts: Hosts, h1: Host, pg: subprocess.Popen[bytes],
           session_timeout_s: float) -> HostCluster:
    import pyspark

    zk = Ensemble(hosts, list(hosts.hosts)).start()
    say(f"ZooKeeper ensemble {zk}")
    bootstrap = f"{h1.address}:{KAFKA_PORT}"
    procs: dict[str, dict[str, subprocess.Popen[bytes]]] = {h.name: {} for h in hosts.hosts}
    node = broker.Node.plain(1, h1.address, KAFKA_PORT, KAFKA_CONTROLLER_PORT)
    config = broker.write_node(h1.disk / "kafka", node, [node], seen_as=DISK / "kafka")
    java, libs = find_java(), broker.fetch()
    formatted = hosts.run(h1, broker.format_argv(java, libs, config, broker.cluster_id()), 120)
    if formatted.returncode != 0:
        raise StackError(f"formatting Kafka's storage on h1 failed: {formatted.stdout[-2000:]}")
    procs["h1"]["kafka"] = hosts.start(h1, broker.server_argv(java, libs, config),
                                       h1.disk / "logs" / "kafka.log")
    wait_until(lambda: kafka_round_trip(KafkaClients(bootstrap)), 90,
               f"Kafka on {bootstrap}", lambda: procs["h1"]["kafka"].poll() is None,
               h1.disk / "logs" / "kafka.log")
    say(f"Kafka {bootstrap}")
    state_url = f"postgresql://{postgres.USER}@{hosts.subnet}.1:{PG_PORT}/{postgres.DATABASE}"
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    master = f"spark://{h1.address}:{SPARK_PORT}"
    py = {**CODE, "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
          "SPARK_HOME": str(Path(pyspark.__file__).parent)}
    procs["h1"]["spark-master"] = hosts.start(h1, [
        spark_class, "org.apache.spark.deploy.master.Master", "--host", h1.address,
        "--port", str(SPARK_PORT), "--webui-port", "8081"], h1.disk / "logs" / "master.log",
        env={**py, "SPARK_LOCAL_IP": h1.address}, cwd=h1.disk)
    for h in hosts.hosts:
        procs[h.name]["spark-worker"] = hosts.start(h, [
            spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", h.address,
            "--cores", "1", "--memory", "1g", "--webui-port", "8082",
            "--work-dir", str(DISK / "spark")], h.disk / "logs" / "spark-worker.log",
            env={**py, "SPARK_LOCAL_IP": h.address}, cwd=h.disk)
    wait_until(lambda: _spark_workers(f"http://{h1.address}:8081/json/") >= len(hosts.hosts),
               120, f"{len(hosts.hosts)} Spark workers at {master}")
    token = secrets.token_urlsafe(18)
    api = []
    for h in hosts.hosts[:2]:
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
                "--fence-after-s", str(session_timeout_s / 6)],
                h.disk / "logs" / f"worker-{kind}.log",
                {**CODE, "SQUALL_STATE_URL": state_url, "PYSPARK_PYTHON": sys.executable,
                 "SPARK_LOCAL_IP": h.address})
            starts[(name, f"worker-{kind}")] = start
            procs[name][f"worker-{kind}"] = hosts.start(h, start[0], start[1], env=start[2],
                                                        cwd=h.disk)
    cl = HostCluster(hosts, bootstrap, zk, state_url, api, token, procs, starts)
    deadline = time.monotonic() + 120
    while True:
        try:
            workers = cl.client().workers()
            if len(workers) >= len(WORKER_HOSTS) * len(WORKER_PORTS):
                break
        except Exception as e:  # not up yet
            if time.monotonic() > deadline:
                raise StackError(f"the workers did not register in 120 s: {e}") from e
        if time.monotonic() > deadline:
            raise StackError("the workers did not register in 120 s")
        time.sleep(0.5)
    say(f"API {', '.join(api)}; {len(workers)} workers registered")
    assert pg.poll() is None and os.path.isdir(hosts.shared)
    return cl


def _spark_workers(status_url: str) -> int:
    with urllib.request.urlopen(status_url, timeout=2) as r:
        doc = json.load(r)
    return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")


#: A task process's module, as its command line names it.
_MODULES = ("services.spout", "services.acker", "services.bolts")


def units_running(hosts: Hosts) -> dict[str, set[tuple[str, str]]]:
    """Per host, the units its processes run now, from their command lines: a spout's
    ``(component, task)``, an acker's ``("__acker", task)``, a bolts job's ``(bolt, "*")``.
    What ZooKeeper's assignment says is not looked at: this is what really runs."""
    out: dict[str, set[tuple[str, str]]] = {}
    for h in hosts.hosts:
        mine: set[tuple[str, str]] = set()
        for pid in hosts.pids(h):
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            if "-m" not in args or args[args.index("-m") + 1] not in _MODULES:
                continue
            module = args[args.index("-m") + 1]
            if module == "services.spout":
                mine |= {(_flag(args, "--component")[0], t) for t in _flag(args, "--tasks")}
            elif module == "services.acker":
                mine |= {("__acker", t) for t in _flag(args, "--tasks")}
            else:
                mine |= {(c, "*") for c in _flag(args, "--components")}
        out[h.name] = mine
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
