"""Spout throughput: source messages opened, acked and committed per second by one process.

A real spout process (``python -m services.spout``) reads a pre-filled source
topic on the embedded broker; a real acker process tracks the trees; the
downstream "bolt" acks every tuple at once (vectorized: the anchor columns of
each tuple batch become ack records directly). The clock runs from the spout's
start until its committed offsets cover every message.

Baseline in the same run: a bare confluent-kafka consumer reading the same
messages (no tracking at all).

Last line: one JSON object with ``{"messages_per_s": ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer, TopicPartition

from squall.core.reliability.records import AckerBatch, RecordKind
from squall.core.topology.topics import acker_topic, dlq_topic, edge_topic, results_topic
from squall.core.wire.internal import encode_acker_batch
from squall.core.wire.tuple_batch import IDS_COL, ROOTS_COL, decode_tuples
from squall.dev.stack import EmbeddedStack, StackSettings
from squall.kafka import ensure_topics
from squall.kafka_clients import KafkaClients
from squall.processes import die_with_parent, free_port

ROOT = Path(__file__).resolve().parents[1]


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fill(bootstrap: str, topic: str, n: int, parts: int, size: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    body = b"x" * (size - 12)
    for i in range(n):
        while True:
            try:
                p.produce(topic, b"%011d " % i + body, partition=i % parts)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def bare_consume(bootstrap: str, topic: str, n: int, parts: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(5000, 1.0) if not m.error())
    secs = time.perf_counter() - t0
    c.close()
    return n / secs


def auto_ack_bolt(bootstrap: str, edge: str, parts: int, acker: str, n_ackers: int,
                  stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        _auto_ack(bootstrap, edge, parts, acker, n_ackers, stop)
    except BaseException as e:
        errors.append(e)
        stop.set()


def _auto_ack(bootstrap: str, edge: str, parts: int, acker: str, n_ackers: int,
              stop: threading.Event) -> None:
    """Ack every tuple at once: ack value = its edge id (a leaf emits no children)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    c.assign([TopicPartition(edge, p, 0) for p in range(parts)])
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    while not stop.is_set():
        roots, ids = [], []
        for m in c.consume(1000, 0.05):
            raw = m.value()
            if m.error() or raw is None:
                continue
            data = decode_tuples(raw).data
            roots.append(data.column(ROOTS_COL).flatten().to_numpy())
            ids.append(data.column(IDS_COL).flatten().to_numpy())
        if not roots:
            continue
        r, v = np.concatenate(roots), np.concatenate(ids)
        owner = r % np.uint64(n_ackers)
        now = int(time.time() * 1000)
        for a in range(n_ackers):
            idx = np.flatnonzero(owner == np.uint64(a))
            for lo in range(0, idx.size, 20_000):  # keep messages well under the size limit
                sel = idx[lo:lo + 20_000]
                k = sel.size
                b = AckerBatch(r[sel], v[sel], np.full(k, RecordKind.ACK, np.uint8),
                               np.zeros(k, np.uint16), np.full(k, now, np.int64))
                p.produce(acker, encode_acker_batch(b, now), partition=a)
        p.poll(0)
    p.flush(10)
    c.close()


def committed(c: Consumer, topic: str, parts: int) -> int:
    return sum(max(tp.offset, 0) for tp in c.committed(
        [TopicPartition(topic, p) for p in range(parts)], timeout=10))


def acked_total(port: int) -> float:
    import urllib.request

    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read()
    except OSError:
        return 0.0
    for line in body.decode().splitlines():
        if line.startswith("squall_spout_acked_total{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def steady_rate(samples: list[tuple[float, float]], n: int) -> float:
    """Acks per second between 10 % and 90 % of the messages: start-up and tail excluded."""
    lo = next((s for s in samples if s[1] >= 0.1 * n), None)
    hi = next((s for s in samples if s[1] >= 0.9 * n), None)
    if lo is None or hi is None or hi[0] <= lo[0]:
        return 0.0
    return (hi[1] - lo[1]) / (hi[0] - lo[0])


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--size", type=int, default=100, help="bytes per source message")
    ap.add_argument("--max-spout-pending", type=int, default=200_000)
    ap.add_argument("--profile", default="", help="write a cProfile of the spout to this file")
    ap.add_argument("--commit-interval-s", type=float, default=1.0)
    args = ap.parse_args()
    n, parts = args.messages, args.partitions
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp, \
            EmbeddedStack(StackSettings(home=Path(tmp) / "stack")) as info:
        b = info.bootstrap_servers
        topo, src = f"bench{uuid.uuid4().hex[:6]}", "bench-source"
        edge = edge_topic(topo, "spout", "default", "bolt")
        # The topology's topics exist before the clock starts, as after a submit (a topic
        # created by the spout itself costs ~1 s of metadata propagation on its first run).
        ensure_topics(KafkaClients(b), {src: parts, edge: 2, acker_topic(topo): 1,
                                        results_topic(topo): 1, dlq_topic(topo): 1})
        say(f"filling {src} with {n:,} messages of {args.size} bytes ...")
        fill(b, src, n, parts, args.size)
        baseline = bare_consume(b, src, n, parts)
        say(f"bare consumer: {baseline:,.0f} messages/s")
        logs = Path(tmp)
        acker = subprocess.Popen(
            [sys.executable, "-m", "services.acker", "--topology", topo, "--tasks", "0",
             "--num-ackers", "1", "--bootstrap-servers", b, "--message-timeout-s", "120"],
            env=env, stdout=open(logs / "acker.log", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        stop = threading.Event()
        errors: list[BaseException] = []
        bolt = threading.Thread(target=auto_ack_bolt, args=(b, edge, 2, acker_topic(topo), 1,
                                                            stop, errors))
        bolt.start()
        port = free_port()
        t0 = time.perf_counter()
        prof = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        spout = subprocess.Popen(
            [sys.executable, *prof, "-m", "services.spout", "--topology", topo, "--topics", src,
             "--tasks", "0", "--num-tasks", "1", "--num-ackers", "1", "--edge", "bolt:2:shuffle",
             "--scheme", "raw", "--bootstrap-servers", b, "--metrics-port", str(port),
             "--max-spout-pending", str(args.max_spout_pending),
             "--max-uncommitted-offsets", str(max(n, 1)), "--commit-interval-s",
             str(args.commit_interval_s),
             "--message-timeout-s", "120"],
            env=env, stdout=open(logs / "spout.log", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        watcher = Consumer({"bootstrap.servers": b, "group.id": f"squall.{topo}.spout",
                            "enable.auto.commit": False})
        try:
            done, last_move = 0, time.monotonic()
            samples: list[tuple[float, float]] = []
            while done < n and not stop.is_set() and time.monotonic() - last_move < 60:
                time.sleep(0.1)
                now_done = committed(watcher, src, parts)
                if now_done > done:
                    done, last_move = now_done, time.monotonic()
                samples.append((time.perf_counter(), acked_total(port)))
            secs = time.perf_counter() - t0
            cpu = {name: cpu_seconds(proc.pid) for name, proc in
                   (("spout", spout), ("acker", acker))}
            cpu["broker"] = cpu_seconds(info.processes[0].pid)
            cpu["bench+bolt"] = cpu_seconds(os.getpid())
        finally:
            for proc in (spout, acker):
                proc.terminate()
                proc.wait(30)
            stop.set()
            bolt.join()
            watcher.close()
        if errors:
            raise errors[0]
        if done < n:
            raise SystemExit(f"only {done:,} of {n:,} committed (no progress for 60s):\n"
                             + (logs / "spout.log").read_text()[-2000:])
        rate = n / secs
        steady = steady_rate(samples, n)
        say(f"spout: {n:,} messages opened, acked and committed in {secs:.2f}s = "
            f"{rate:,.0f} messages/s (start-up included); steady state {steady:,.0f}/s")
        say("CPU seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items()))
    print(json.dumps({"messages_per_s": round(rate), "steady_messages_per_s": round(steady),
                      "seconds": round(secs, 2), "messages": n, "partitions": parts,
                      "baseline_bare_consumer_per_s": round(baseline),
                      "cpu_seconds": {k: round(v, 1) for k, v in cpu.items()}}))


if __name__ == "__main__":
    main()
