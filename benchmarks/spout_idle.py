"""The spout's CPU when it has nothing to do: idle, and with trees in flight that nothing
answers (its bolts stalled).

A real spout and acker of the word count on the embedded broker, no bolts job: first
``--seconds`` idle, then ``--trees`` sentences fed and, once the spout emitted them,
``--seconds`` more with every tree pending (each window after ``--settle`` seconds).
While trees are in flight the spout waits only 2 ms a pass for source records (its
results come on its other consumer), so this is what that costs.

Last line: one JSON object, ``{"spout_cpu_pct_idle", "spout_cpu_pct_in_flight", ...}``
(% of one core).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer

from benchmarks.measure import sample_sums, tree_cpu
from benchmarks.pipeline import ROOT
from examples.wordcount import topology
from squall.core.topology.grouping import edge_flag
from squall.dev.stack import EmbeddedStack, StackSettings
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent, free_port


def emitted(port: int) -> float | None:
    """The spout's emitted count, None while its metrics are not up."""
    try:
        return sample_sums(port, {"squall_spout_emitted_total": "n"})["n"]
    except OSError:
        return None


def await_emitted(port: int, n: int, timeout_s: float = 60) -> None:
    """Until the spout's metrics are up and it emitted at least ``n`` (0: only up)."""
    deadline = time.monotonic() + timeout_s
    while (got := emitted(port)) is None or got < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the spout did not emit {n} sentences in {timeout_s} s")
        time.sleep(0.1)


def cpu_pct(pid: int, seconds: float) -> float:
    c0, t0 = tree_cpu(pid), time.monotonic()
    time.sleep(seconds)  # a measuring window, not a synchronisation
    return 100 * (tree_cpu(pid) - c0) / (time.monotonic() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10, help="each measuring window")
    ap.add_argument("--trees", type=int, default=2000, help="sentences left in flight")
    ap.add_argument("--settle", type=float, default=5,
                    help="seconds left out after start-up and after the feed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, \
            EmbeddedStack(StackSettings(home=Path(d) / "stack")) as info:
        b, tmp = info.bootstrap_servers, Path(d)
        name = f"idle{uuid.uuid4().hex[:6]}"
        src = f"sentences-{name}"
        spec = topology(name=name, source=src, vectorized=True)
        ensure_topics(KafkaClients(b), {src: 1})
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        procs: list[subprocess.Popen[bytes]] = []

        def start(tag: str, argv: list[str]) -> subprocess.Popen[bytes]:
            p = subprocess.Popen([sys.executable, "-m", *argv], env=env,
                                 stdout=open(tmp / f"{tag}.log", "wb"),  # noqa: SIM115
                                 stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
            procs.append(p)
            return p

        start("acker", ["services.acker", "--topology", name, "--tasks", "0,1",
                        "--num-ackers", "2", "--bootstrap-servers", b,
                        "--message-timeout-s", "60", "--metrics-port", str(free_port())])
        edges = [a for e in spec.edges_from("sentences") for a in ("--edge", edge_flag(e))]
        port = free_port()
        spout = start("spout", ["services.spout", "--topology", name, "--component",
                                "sentences", "--topics", src, "--tasks", "0", "--num-tasks",
                                "1", "--num-ackers", "2", *edges, "--bootstrap-servers", b,
                                "--metrics-port", str(port), "--message-timeout-s", "60"])
        try:
            await_emitted(port, 0)  # up
            time.sleep(args.settle)  # start-up's own work (imports, joins) left out
            idle = cpu_pct(spout.pid, args.seconds)
            p = Producer({"bootstrap.servers": b})
            for _ in range(args.trees):
                p.produce(src, b"the cow jumped over the moon")
            assert p.flush(30) == 0
            await_emitted(port, args.trees)
            time.sleep(args.settle)
            in_flight = cpu_pct(spout.pid, args.seconds)
        finally:
            for pr in procs:
                pr.terminate()
    print(json.dumps({"spout_cpu_pct_idle": round(idle, 1),
                      "spout_cpu_pct_in_flight": round(in_flight, 1),
                      "trees": args.trees, "seconds": args.seconds}))


if __name__ == "__main__":
    main()
