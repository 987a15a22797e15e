"""The benchmarks' word count pipeline run by hand (an acker, the bolts job on Spark and a
spout, each a process of its own), its input and its commits."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from examples.wordcount import topology
from squall.core.topology.grouping import edge_flag
from squall.core.topology.model import TopologySpec
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[1]
PARTS = 2


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


#: Words in each benchmark sentence.
WORDS = 10


def make_sentences(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    vocab = [f"w{i:03d}" for i in range(1000)]
    return [" ".join(rng.choices(vocab, k=WORDS)).encode() for _ in range(n)]


def produce(bootstrap: str, topic: str, lines: list[bytes], rate: float | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    t0 = time.perf_counter()
    for i, line in enumerate(lines):
        if rate and i % 100 == 0:
            ahead = i / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                p.produce(topic, line, partition=i % PARTS)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def committed(c: Consumer, topic: str) -> int:
    return sum(max(tp.offset, 0) for tp in
               c.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=10))


def wait_committed(c: Consumer, topic: str, n: int, stall_s: float = 180,
                   procs: Mapping[str, subprocess.Popen[bytes]] | None = None) -> float:
    """When every offset is committed; fails after ``stall_s`` without progress, or at
    once when one of ``procs`` has exited (a service that could not start, say)."""
    last, moved = -1, time.monotonic()
    while time.monotonic() - moved < stall_s:
        for tag, pr in (procs or {}).items():
            if pr.poll() is not None:
                raise RuntimeError(f"the {tag} process exited (code {pr.returncode}) with "
                                   f"{last} of {n} committed on {topic}")
        done = committed(c, topic)
        if done >= n:
            return time.perf_counter()
        if done > last:
            last, moved = done, time.monotonic()
        time.sleep(0.05)
    raise RuntimeError(f"only {last} of {n} committed on {topic}, no progress for {stall_s}s")


@dataclass
class Pipeline:
    """The word count's processes (acker, bolts job, spout) and where to read them."""

    name: str
    source: str
    procs: dict[str, subprocess.Popen[bytes]]
    spout_port: int
    bolts_port: int
    acker_port: int

    def stop(self) -> None:
        for pr in self.procs.values():
            pr.send_signal(signal.SIGTERM)
        for pr in self.procs.values():
            try:
                pr.wait(60)
            except subprocess.TimeoutExpired:
                pr.kill()

    def log_tails(self, tmp: Path) -> None:
        for tag in self.procs:
            log_tail = (tmp / f"{tag}.log").read_text(errors="replace").splitlines()[-40:]
            say(f"--- {tag}.log (last 40 lines)\n" + "\n".join(log_tail))


def launch(b: str, tmp: Path, max_rows: int = 2_000, trigger_ms: int = 50,
           exact: bool = False, pending: int = 50_000, bolt_flags: Sequence[str] = (),
           build: Callable[[str, str], TopologySpec] | None = None,
           service_flags: Sequence[str] = ()) -> Pipeline:
    """Start the vectorized word count's acker, bolts job (Spark ``local[2]``) and spout;
    ``bolt_flags``: more flags of the bolts job; ``build``: another topology of a spout
    named ``sentences``, from its name and source topic; ``service_flags``: more flags of
    the spout and the acker."""
    name = f"wc{uuid.uuid4().hex[:6]}"
    src = f"sentences-{name}"
    spec = build(name, src) if build is not None else \
        topology(name=name, source=src, vectorized=True, exact=exact)
    (tmp / f"{name}.json").write_text(spec.to_json())
    ensure_topics(KafkaClients(b), {src: PARTS})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    port, bolts_port, acker_port = free_port(), free_port(), free_port()
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(tag: str, args: list[str]) -> None:
        procs[tag] = subprocess.Popen([sys.executable, "-m", *args], env=env,
                                      stdout=open(tmp / f"{tag}.log", "wb"),  # noqa: SIM115
                                      stderr=subprocess.STDOUT, preexec_fn=die_with_parent)

    start("acker", ["services.acker", "--topology", name, "--tasks", "0,1", "--num-ackers", "2",
                    "--bootstrap-servers", b, "--message-timeout-s", "60",
                    "--metrics-port", str(acker_port), *service_flags])
    start("bolts", ["services.bolts", "--topology-file", str(tmp / f"{name}.json"),
                    "--bootstrap-servers", b, "--checkpoint-dir", str(tmp / "ckpt"),
                    "--master", "local[2]", "--trigger-ms", str(trigger_ms),
                    "--max-rows-per-batch", str(max_rows),
                    "--metrics-port", str(bolts_port),
                    "--state-url", f"sqlite://{tmp / f'{name}-state.db'}", *bolt_flags])
    edges = [a for e in spec.edges_from("sentences") for a in ("--edge", edge_flag(e))]
    start("spout", ["services.spout", "--topology", name, "--component", "sentences",
                    "--topics", src, "--tasks", "0", "--num-tasks", "1", "--num-ackers", "2",
                    *edges, "--bootstrap-servers", b, "--metrics-port", str(port),
                    "--message-timeout-s", "60", "--max-spout-pending", str(pending),
                    "--commit-interval-s", "0.25", *service_flags])
    return Pipeline(name, src, procs, port, bolts_port, acker_port)
