"""Helpers for tests on the real stack: service processes, producing records, reading results."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from squall.core.reliability.ids import acker_partition
from squall.core.reliability.records import AckerBatch, AckerRecord, RecordKind, Result
from squall.core.topology.model import TopologySpec
from squall.core.wire.internal import decode_results, encode_acker_batch
from squall.dev.stack import StackInfo
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent, free_port


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.05,
             explain: Callable[[], str] | None = None) -> None:
    """Poll ``cond`` until true; fail the test naming ``what`` otherwise (and adding what
    ``explain`` says then: logs, say, read only on failure)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(every_s)
    detail = "\n" + explain() if explain is not None else ""
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}{detail}")


class ServiceProcess:
    """A service run as a real process (``python -m <module> ...``) with a metrics port."""

    def __init__(self, module: str, args: Sequence[str], log: Path,
                 env: dict[str, str] | None = None) -> None:
        self.module = module
        self.metrics_port = free_port()
        self.args = [*args, "--metrics-port", str(self.metrics_port)]
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServiceProcess:
        out = open(self.log, "ab")  # noqa: SIM115 - handed to the child, closed on stop
        self.proc = subprocess.Popen([sys.executable, "-m", self.module, *self.args],
                                     stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                     preexec_fn=die_with_parent)
        wait_for(lambda: self._metrics_up() or not self.alive(), 60,
                 f"{self.module} metrics on port {self.metrics_port}")
        assert self.alive(), f"{self.module} died at start:\n{self.log_tail()}"
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _metrics_up(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=1)
            return True
        except OSError:
            return False

    def metrics(self) -> dict[str, float]:
        """Samples by ``name{label=value,...}`` (labels sorted), from a real scrape."""
        body = urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(body):
            for s in fam.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
        return out

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout_s: float = 30) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout_s)

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.alive():
            self.signal(signal.SIGTERM)
            try:
                self.wait(20)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.wait(10)

    def __enter__(self) -> ServiceProcess:
        # ``with svc.start():`` and ``with svc:`` both start it once.
        return self if self.alive() else self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def produce_acker_records(bootstrap: str, topic: str, n_ackers: int,
                          records: Iterable[AckerRecord], batch: int = 100,
                          ts_ms: int | None = None) -> int:
    """Pack records into acker batches on partition ``root mod N``; returns messages sent."""
    per_part: dict[int, list[AckerRecord]] = {}
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    sent = 0

    def flush_part(part: int) -> None:
        nonlocal sent
        recs = per_part.pop(part, [])
        if recs:
            ts = int(time.time() * 1000) if ts_ms is None else ts_ms
            p.produce(topic, encode_acker_batch(AckerBatch.from_records(recs, ts), ts),
                      partition=part)
            sent += 1

    for r in records:
        part = acker_partition(r.root, n_ackers)
        per_part.setdefault(part, []).append(r)
        if len(per_part[part]) >= batch:
            flush_part(part)
    for part in list(per_part):
        flush_part(part)
    assert p.flush(30) == 0
    return sent


class ResultReader:
    """Reads every partition of a results topic, accumulating results."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                           "enable.auto.commit": False})
        self.c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.results: list[tuple[int, Result]] = []  # (partition, result)

    def poll(self) -> list[Result]:
        new: list[Result] = []
        for m in self.c.consume(500, 0.1):
            raw = m.value()
            if m.error() or raw is None:
                continue
            got = decode_results(raw).results()
            self.results += [(m.partition() or 0, r) for r in got]
            new += got
        return new

    def caught_up(self) -> bool:
        """Polled, and read to the end of every partition as it stands now."""
        self.poll()
        for tp in self.c.assignment():
            _, high = self.c.get_watermark_offsets(tp, timeout=10)
            if self.c.position([tp])[0].offset < high:
                return False
        return True

    def roots(self) -> dict[int, list[Result]]:
        out: dict[int, list[Result]] = {}
        for _, r in self.results:
            out.setdefault(r.root, []).append(r)
        return out

    def close(self) -> None:
        self.c.close()


def clients(kafka: KafkaClients | str) -> KafkaClients:
    """A cluster's clients; a bootstrap string: the embedded broker's, no properties."""
    return KafkaClients(kafka) if isinstance(kafka, str) else kafka


def consume(bootstrap: KafkaClients | str, topic: str, n: int, partition: int = 0,
            timeout_s: float = 20) -> list[Any]:
    """The first ``n`` messages of a partition (fewer if they do not come in time)."""
    c = clients(bootstrap).consumer({"group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            out += [m for m in c.consume(100, 0.2) if not m.error()]
    finally:
        c.close()
    return out


def committed_offsets(bootstrap: KafkaClients | str, group: str, topic: str,
                      partitions: int) -> list[int]:
    c = clients(bootstrap).consumer({"group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in c.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=10)]
    finally:
        c.close()


def shuffled(items: Sequence[AckerRecord], seed: int) -> list[AckerRecord]:
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


class ScriptedBolt:
    """Stands in for a bolt: reads tuple batches from an edge topic, acks or fails by rule.

    ``rule(value, delivery)`` returns "ack", "fail" or a delay in seconds before acking;
    ``delivery`` counts how often that value was seen (1 = first time).
    """

    def __init__(self, bootstrap: str, edge_topic: str, partitions: int, acker: str,
                 n_ackers: int, rule: Callable[[Any, int], Any], keep_values: bool = False) -> None:
        import threading

        self.bootstrap, self.acker, self.n_ackers, self.rule = bootstrap, acker, n_ackers, rule
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                           "enable.auto.commit": False})
        self.c.assign([TopicPartition(edge_topic, p, 0) for p in range(partitions)])
        self.seen: dict[Any, int] = {}
        self.acked: set[Any] = set()
        self.untracked = 0
        self.keep_values = keep_values
        self.values: list[tuple[Any, ...]] = []
        self._held: list[tuple[float, Any, list[AckerRecord]]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ScriptedBolt:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.c.close()

    def acked_snapshot(self) -> set[Any]:
        with self._lock:
            return set(self.acked)

    def _run(self) -> None:
        from squall.core.wire.tuple_batch import decode_tuples

        while not self._stop.is_set():
            out: list[AckerRecord] = []
            for m in self.c.consume(500, 0.05):
                raw = m.value()
                if m.error() or raw is None:
                    continue
                for t in decode_tuples(raw).tuples():
                    value = t.values[0]
                    if self.keep_values:
                        self.values.append(t.values)
                    with self._lock:
                        self.seen[value] = self.seen.get(value, 0) + 1
                    if not t.tracked:
                        self.untracked += 1
                        continue
                    verdict = self.rule(value, self.seen[value])
                    if verdict == "fail":
                        out += [AckerRecord(RecordKind.FAIL, r) for r in t.anchors]
                    else:
                        recs = [AckerRecord(RecordKind.ACK, r, e) for r, e in t.anchors.items()]
                        delay = 0.0 if verdict == "ack" else float(verdict)
                        self._held.append((time.monotonic() + delay, value, recs))
            now = time.monotonic()
            due = [h for h in self._held if h[0] <= now]
            self._held = [h for h in self._held if h[0] > now]
            with self._lock:
                self.acked.update(v for _, v, _ in due)
            out += [r for _, _, recs in due for r in recs]
            if out:
                produce_acker_records(self.bootstrap, self.acker, self.n_ackers, out, batch=500)


def produce_source(bootstrap: KafkaClients | str, topic: str, values: Sequence[bytes],
                   partitions: int) -> list[tuple[int, int]]:
    """Produce values round-robin over partitions; returns (partition, offset) of each."""
    p = clients(bootstrap).producer({"linger.ms": 5})
    where: dict[int, tuple[int, int]] = {}
    for i, v in enumerate(values):
        def cb(err: Any, msg: Any, i: int = i) -> None:
            assert err is None, err
            where[i] = (msg.partition(), msg.offset())
        p.produce(topic, v, partition=i % partitions, on_delivery=cb)
    assert p.flush(30) == 0
    return [where[i] for i in range(len(values))]


def edge_ranges(bootstrap: str, topic: str, values: Sequence[bytes], task: int = 0) -> Any:
    """Write edge records to partition ``task`` of a real topic; the ranges a micro-batch
    plans for them (a bolt task's part of it)."""
    from services.bolts.planning import TaskPartition
    from squall.kafka import ensure_topics

    ensure_topics(clients(bootstrap), {topic: task + 1}, 30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    offsets: list[int] = []

    def delivered(err: Any, msg: Any) -> None:
        offsets.append(-1 if err or msg.offset() is None else int(msg.offset()))

    for v in values:
        p.produce(topic, v, partition=task, on_delivery=delivered)
    assert p.flush(30) == 0 and min(offsets) >= 0
    return TaskPartition(task, [(topic, task, min(offsets), max(offsets) + 1)])


def topology_services(spec: TopologySpec, bootstrap: str, tmp: Path,
                      components: Sequence[str] = (), state_url: str = "",
                      env: dict[str, str] | None = None
                      ) -> tuple[ServiceProcess, ServiceProcess, ServiceProcess]:
    """``spec``'s acker (every task), first spout (every task) and bolts job (``components``;
    default all) on ``local[2]``, its file written to ``tmp``; not started. ``env``: more
    environment for all three (a secured cluster's client properties)."""
    topo = tmp / "topology.json"
    topo.write_text(spec.to_json())
    spout = spec.spouts[0]
    tasks = ",".join(str(t) for t in range(spout.parallelism))
    acker = ServiceProcess("services.acker", [
        "--topology", spec.name, "--tasks", ",".join(str(t) for t in range(spec.ackers)),
        "--num-ackers", str(spec.ackers), "--bootstrap-servers", bootstrap], tmp / "acker.log",
        env=env)
    spouts = ServiceProcess("services.spout", [
        "--topology-file", str(topo), "--component", spout.name, "--tasks", tasks,
        "--num-tasks", str(spout.parallelism), "--bootstrap-servers", bootstrap,
        "--commit-interval-s", "0.5"], tmp / "spout.log", env=env)
    bolts = ServiceProcess("services.bolts", [
        "--topology-file", str(topo), "--bootstrap-servers", bootstrap,
        "--checkpoint-dir", str(tmp / "ckpt"), "--master", "local[2]", "--trigger-ms", "100",
        *(["--components", ",".join(components)] if components else []),
        *(["--state-url", state_url] if state_url else [])], tmp / "bolts.log",
        env={**(env or {}), "PYSPARK_PYTHON": sys.executable})
    return acker, spouts, bolts


def wait_for_queries(bolts: ServiceProcess) -> None:
    """Until the bolts job's queries run (or it died: the test fails with its log)."""
    wait_for(lambda: "bolt queries running" in bolts.log_tail(200) or not bolts.alive(),
             180, "the bolt queries")
    assert bolts.alive(), bolts.log_tail()


def supervised_services(topo: Path, name: str, bootstrap: str, tmp: Path, state_url: str,
                        master: str = "local[2]", timeout_s: float = 8
                        ) -> tuple[Any, Any, ServiceProcess, ServiceProcess]:
    """A topology whose bolts job runs supervised, as a worker runs it (restarted when it
    dies), with one spout task reading ``sentences``: ``(supervisor, bolts command, acker,
    spout)``; start the bolts with ``supervisor.start("bolts", command)``. Trees time out
    after ``timeout_s``."""
    from squall.supervision import Command, Supervisor

    sup = Supervisor(tmp / "logs")
    bolts = Command("services.bolts", (
        "--topology-file", str(topo), "--bootstrap-servers", bootstrap,
        "--checkpoint-dir", str(tmp / "ckpt"), "--master", master, "--trigger-ms", "100",
        "--state-url", state_url), {"PYSPARK_PYTHON": sys.executable}, metrics=False)
    acker = ServiceProcess("services.acker", [
        "--topology", name, "--tasks", "0,1", "--num-ackers", "2",
        "--bootstrap-servers", bootstrap, "--message-timeout-s", str(timeout_s)],
        tmp / "acker.log")
    spout = ServiceProcess("services.spout", [
        "--topology-file", str(topo), "--component", "sentences", "--tasks", "0",
        "--num-tasks", "1", "--bootstrap-servers", bootstrap, "--commit-interval-s", "0.5"],
        tmp / "spout.log")
    return sup, bolts, acker, spout


def acker_worker(stack: StackInfo, tmp_path: Path, worker_id: str, *extra: str
                 ) -> ServiceProcess:
    """An acker worker of ``stack``, started (``extra``: its fence options)."""
    return ServiceProcess("services.worker", [
        "--kind", "acker", "--worker-id", worker_id, "--zookeeper", stack.zookeeper,
        "--bootstrap-servers", stack.bootstrap_servers, "--workdir", str(tmp_path / "w"),
        *extra], tmp_path / "worker.log").start()


def run_ackers_only(http: Any, worker: ServiceProcess, worker_id: str,
                    timeout_s: float = 30) -> str:
    """Submit a topology of one acker task (a spout, no bolts) through the API client
    ``http``, and wait until the acker worker ``worker_id`` runs it; its name."""
    name = f"ack{uuid.uuid4().hex[:6]}"
    spec = {"name": name, "ackers": 1, "spouts": [{"name": "s", "topics": ["t"]}]}
    assert http.post("/topologies", json=spec).status_code == 201
    procs = f"squall_worker_processes{{kind=acker,worker={worker_id}}}"
    wait_for(lambda: worker.metrics().get(procs) == 1, timeout_s, "the acker task")
    return name
